// Package geodb places websim's synthetic hosts in real cities and writes
// GeoIP2-City-format MaxMind DB files describing where each host IP is.
//
// Cities lists the cities, grouped into websim regions; Write and WriteFile
// turn a list of (IP, City) entries into a database that
// github.com/oschwald/geoip2-golang reads like a GeoLite2-City file.
package geodb

// City is a real city where websim places host IPs.
type City struct {
	Name          string  // English name, e.g. "Paris"
	CountryISO    string  // ISO 3166-1 alpha-2 code, e.g. "FR"
	CountryName   string  // English country name, e.g. "France"
	ContinentCode string  // GeoIP2 continent code, e.g. "EU"
	ContinentName string  // English continent name, e.g. "Europe"
	Region        string  // websim region, one of RegionNames
	Lat, Lon      float64 // degrees, WGS 84
	TimeZone      string  // IANA time zone, e.g. "Europe/Paris"
	GeoNameID     uint    // stable nonzero id assigned by websim, not the real GeoNames id
}

// RegionNames lists the websim regions, in the order used by RegionWeights
// and by Cities.
var RegionNames = []string{"na", "eu", "as", "sa", "oc", "af"}

// RegionWeights is the share of hosts placed in each region, in
// RegionNames order; the weights sum to 1.
var RegionWeights = []float64{0.34, 0.32, 0.22, 0.05, 0.04, 0.03}

// Cities is the table of cities, ordered by region (in RegionNames order)
// and then by name (byte order). GeoNameIDs are 1000*k+n for the k-th
// region and the n-th city within it.
var Cities = []City{
	// na: North America
	{"Atlanta", "US", "United States", "NA", "North America", "na", 33.75, -84.39, "America/New_York", 1001},
	{"Chicago", "US", "United States", "NA", "North America", "na", 41.88, -87.63, "America/Chicago", 1002},
	{"Dallas", "US", "United States", "NA", "North America", "na", 32.78, -96.80, "America/Chicago", 1003},
	{"Los Angeles", "US", "United States", "NA", "North America", "na", 34.05, -118.24, "America/Los_Angeles", 1004},
	{"Mexico City", "MX", "Mexico", "NA", "North America", "na", 19.43, -99.13, "America/Mexico_City", 1005},
	{"Miami", "US", "United States", "NA", "North America", "na", 25.76, -80.19, "America/New_York", 1006},
	{"Montreal", "CA", "Canada", "NA", "North America", "na", 45.50, -73.57, "America/Toronto", 1007},
	{"New York", "US", "United States", "NA", "North America", "na", 40.71, -74.01, "America/New_York", 1008},
	{"Seattle", "US", "United States", "NA", "North America", "na", 47.61, -122.33, "America/Los_Angeles", 1009},
	{"Toronto", "CA", "Canada", "NA", "North America", "na", 43.65, -79.38, "America/Toronto", 1010},

	// eu: Europe
	{"Amsterdam", "NL", "Netherlands", "EU", "Europe", "eu", 52.37, 4.90, "Europe/Amsterdam", 2001},
	{"Dublin", "IE", "Ireland", "EU", "Europe", "eu", 53.35, -6.26, "Europe/Dublin", 2002},
	{"Frankfurt", "DE", "Germany", "EU", "Europe", "eu", 50.11, 8.68, "Europe/Berlin", 2003},
	{"London", "GB", "United Kingdom", "EU", "Europe", "eu", 51.51, -0.13, "Europe/London", 2004},
	{"Madrid", "ES", "Spain", "EU", "Europe", "eu", 40.42, -3.70, "Europe/Madrid", 2005},
	{"Milan", "IT", "Italy", "EU", "Europe", "eu", 45.46, 9.19, "Europe/Rome", 2006},
	{"Paris", "FR", "France", "EU", "Europe", "eu", 48.86, 2.35, "Europe/Paris", 2007},
	{"Stockholm", "SE", "Sweden", "EU", "Europe", "eu", 59.33, 18.07, "Europe/Stockholm", 2008},
	{"Warsaw", "PL", "Poland", "EU", "Europe", "eu", 52.23, 21.01, "Europe/Warsaw", 2009},
	{"Zurich", "CH", "Switzerland", "EU", "Europe", "eu", 47.37, 8.54, "Europe/Zurich", 2010},

	// as: Asia
	{"Bangalore", "IN", "India", "AS", "Asia", "as", 12.97, 77.59, "Asia/Kolkata", 3001},
	{"Beijing", "CN", "China", "AS", "Asia", "as", 39.90, 116.41, "Asia/Shanghai", 3002},
	{"Dubai", "AE", "United Arab Emirates", "AS", "Asia", "as", 25.20, 55.27, "Asia/Dubai", 3003},
	{"Hong Kong", "HK", "Hong Kong", "AS", "Asia", "as", 22.32, 114.17, "Asia/Hong_Kong", 3004},
	{"Jakarta", "ID", "Indonesia", "AS", "Asia", "as", -6.21, 106.85, "Asia/Jakarta", 3005},
	{"Mumbai", "IN", "India", "AS", "Asia", "as", 19.08, 72.88, "Asia/Kolkata", 3006},
	{"Seoul", "KR", "South Korea", "AS", "Asia", "as", 37.57, 126.98, "Asia/Seoul", 3007},
	{"Singapore", "SG", "Singapore", "AS", "Asia", "as", 1.29, 103.85, "Asia/Singapore", 3008},
	{"Tel Aviv", "IL", "Israel", "AS", "Asia", "as", 32.09, 34.78, "Asia/Jerusalem", 3009},
	{"Tokyo", "JP", "Japan", "AS", "Asia", "as", 35.69, 139.69, "Asia/Tokyo", 3010},

	// sa: South America
	{"Bogotá", "CO", "Colombia", "SA", "South America", "sa", 4.71, -74.07, "America/Bogota", 4001},
	{"Buenos Aires", "AR", "Argentina", "SA", "South America", "sa", -34.60, -58.38, "America/Argentina/Buenos_Aires", 4002},
	{"Lima", "PE", "Peru", "SA", "South America", "sa", -12.05, -77.04, "America/Lima", 4003},
	{"Rio de Janeiro", "BR", "Brazil", "SA", "South America", "sa", -22.91, -43.17, "America/Sao_Paulo", 4004},
	{"Santiago", "CL", "Chile", "SA", "South America", "sa", -33.45, -70.67, "America/Santiago", 4005},
	{"São Paulo", "BR", "Brazil", "SA", "South America", "sa", -23.55, -46.63, "America/Sao_Paulo", 4006},

	// oc: Oceania
	{"Auckland", "NZ", "New Zealand", "OC", "Oceania", "oc", -36.85, 174.76, "Pacific/Auckland", 5001},
	{"Brisbane", "AU", "Australia", "OC", "Oceania", "oc", -27.47, 153.03, "Australia/Brisbane", 5002},
	{"Melbourne", "AU", "Australia", "OC", "Oceania", "oc", -37.81, 144.96, "Australia/Melbourne", 5003},
	{"Perth", "AU", "Australia", "OC", "Oceania", "oc", -31.95, 115.86, "Australia/Perth", 5004},
	{"Sydney", "AU", "Australia", "OC", "Oceania", "oc", -33.87, 151.21, "Australia/Sydney", 5005},
	{"Wellington", "NZ", "New Zealand", "OC", "Oceania", "oc", -41.29, 174.78, "Pacific/Auckland", 5006},

	// af: Africa
	{"Cairo", "EG", "Egypt", "AF", "Africa", "af", 30.04, 31.24, "Africa/Cairo", 6001},
	{"Cape Town", "ZA", "South Africa", "AF", "Africa", "af", -33.92, 18.42, "Africa/Johannesburg", 6002},
	{"Casablanca", "MA", "Morocco", "AF", "Africa", "af", 33.57, -7.59, "Africa/Casablanca", 6003},
	{"Johannesburg", "ZA", "South Africa", "AF", "Africa", "af", -26.20, 28.05, "Africa/Johannesburg", 6004},
	{"Lagos", "NG", "Nigeria", "AF", "Africa", "af", 6.52, 3.38, "Africa/Lagos", 6005},
	{"Nairobi", "KE", "Kenya", "AF", "Africa", "af", -1.29, 36.82, "Africa/Nairobi", 6006},
}

// CitiesIn returns a new slice holding the cities of region, in table
// order; it returns nil for an unknown region.
func CitiesIn(region string) []City {
	var out []City
	for _, c := range Cities {
		if c.Region == region {
			out = append(out, c)
		}
	}
	return out
}
