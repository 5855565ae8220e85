package synth

import "math"

// The realistic profile's link graph is shaped after published measurements
// of the web's: how in-degrees are distributed (webInDegree), how many links
// stay on their host (remoteShare) and where the links that leave it land
// (webFrontShare). The clean and hostile profiles keep the graph they have
// always had, byte for byte (tests throughout the repository depend on it):
// their links pick pages with skewed and hosts with rng.zipf.
//
// A realistic page carries its tree links (to pages n·8+1 … n·8+8, so that
// every page is reachable from its front page) and a Pareto-distributed
// number of further links (mean meanExtra, shape degreeShape). Each further
// link leaves its host with probability remoteShare: it then names another
// host drawn by popularity, and that host's front page with probability
// webFrontShare, or else one of the host's other pages drawn by popularity.
// A link that stays names a page of its own host drawn by popularity.
// Popularity is Zipf's law with exponent webZipf over ranks: host i is the
// (i+1)th most popular host, and page N of a host the (N+1)th most popular
// of its pages (the front page first, then the pages near the top of its
// tree). A draw costs a math.Log and a math.Exp with the per-host
// constants of webTops; nothing grows with the number of pages.
//
// In-degrees are counted in links, as a crawler parsing the pages meets
// them: a page that links another twice counts twice. Counted in distinct
// linking pages they fall off faster (fits of α ≈ 2.3-2.75): a page's
// on-host in-degree is then bounded by its host's size, and a power law of
// 2.1 puts about half of all links on the top few percent of pages, more
// than the 15% of links that leave their host can carry when hosts have a
// few dozen pages. The real web meets both figures because its largest
// sites are many orders of magnitude larger than these webs' hosts.
const (
	// webInDegree is the exponent α of the power law p(k) ∝ k^-α that the
	// in-degrees of a realistic web's pages follow: 2.1, the figure of
	// Broder, Kumar, Maghoul, Raghavan, Rajagopalan, Stata, Tomkins and
	// Wiener ("Graph structure in the Web", WWW9 and Computer Networks 33,
	// 2000) for two AltaVista crawls of about 200 million pages and 1.5
	// billion links (7.2 a page), the same whether all links or only links
	// between hosts are counted. (Their out-degree exponent is 2.72; the
	// out-degree here stays the Pareto of degreeShape, a tail exponent of
	// 3.2.) Larger crawls are less tidy: Meusel, Vigna, Lehmberg and Bizer
	// ("Graph structure in the web — revisited", WWW 2014; Common Crawl
	// 2012, 3.5 billion pages, 128.7 billion links, 37 a page) find
	// in-degrees, out-degrees and component sizes heavy-tailed but not power
	// laws under statistical tests, and Serrano, Maguitman, Boguñá,
	// Fortunato and Vespignani ("Decoding the structure of the WWW", ACM
	// Transactions on the Web, 2007) find that the measures of four large
	// crawls differ with the crawler and the domain crawled. Broder's
	// exponent is still the figure a synthetic web is held to; the fit of
	// TestRealisticWebShape checks it.
	webInDegree = 2.1
	// webZipf is the exponent s of the popularity law link targets are
	// drawn with, calibrated so that the fitted in-degree exponent of the
	// standard realistic web (Hosts 1000, Pages 50, Seed 1) is webInDegree.
	// If every link drew its target from one Zipf law, the page of rank r
	// would get k ∝ r^-s links, r ∝ k^(-1/s) pages would get at least k, so
	// p(k) ∝ k^-(1+1/s), and s = 1/(α-1) ≈ 0.91 would do. Here 85% of
	// links stay on hosts of a few dozen pages, whose pages' on-host
	// in-degrees stop where their host's links run out, and s = 0.91 fits
	// α = 2.17 on the standard web (2.15-2.23 on the webs of
	// TestRealisticWebShape); s = 0.97 fits 2.105 (2.09-2.18).
	webZipf = 0.97
	// webFrontShare is the share of links between hosts that name the
	// target host's front page: 0.40. No peer-reviewed figure was found. The
	// figure is the middle of the "deep link ratio" that search-engine tools
	// report for most sites: 50-70% of a site's inbound links go to pages
	// other than its home page (computerhelp4all.com, "What is deep link
	// ratio?", 2023), so 30-50% go to the home page. The links to other
	// pages concentrate too: most pages get no link from another site
	// (Moz's Linkscape index of early 2009, 36 billion URLs: the median page
	// has no external link, the 99th percentile 8; Ahrefs, about a billion
	// pages of its Content Explorer: 66.31% have no backlink), which
	// popularity-weighted targets reproduce.
	webFrontShare = 0.40
)

// webTops are the per-host constants of a realistic web's link draws: the
// tops of drawRank's inverse for the hosts, and for each host for all its
// pages and for its pages other than the front page. O(hosts) memory.
type webTops struct {
	hosts float64
	pages []float64 // host i: [2i] all pages, [2i+1] pages 1…Pages-1
}

// zipfTop returns (n+½)^(1-webZipf), the top of drawRank's inverse for n
// ranks.
func zipfTop(n int) float64 { return math.Pow(float64(n)+0.5, 1-webZipf) }

// zipfBottom is ½^(1-webZipf), the bottom of drawRank's inverse.
var zipfBottom = math.Pow(0.5, 1-webZipf)

// makeWebTops computes the constants for w's hosts, overrides applied.
func (w *Web) makeWebTops() {
	w.tops.hosts = zipfTop(len(w.hosts))
	w.tops.pages = make([]float64, 2*len(w.hosts))
	for i, h := range w.hosts {
		w.tops.pages[2*i] = zipfTop(h.Pages)
		w.tops.pages[2*i+1] = zipfTop(h.Pages - 1)
	}
}

// drawRank draws a rank in [0, n), n ≥ 1, by Zipf's law with exponent
// s = webZipf: rank i with probability ∝ ∫ x^-s dx over [i+½, i+1½], the
// discrete law (i+1)^-s smoothed, by inverting the distribution function
// of x^-s on [½, n+½]: x = (b + u·(top-b))^(1/(1-s)), where b is zipfBottom
// and top is zipfTop(n), and rank round(x)-1.
func drawRank(r *rng, n int, top float64) int {
	x := math.Exp(math.Log(zipfBottom+r.float()*(top-zipfBottom)) / (1 - webZipf))
	return min(max(int(x+0.5)-1, 0), n-1)
}

// webLocal draws the page that an on-host link of host h names.
func (w *Web) webLocal(r *rng, h int) int {
	return drawRank(r, w.hosts[h].Pages, w.tops.pages[2*h])
}

// webRemote draws the host and page that a link leaving host h names.
func (w *Web) webRemote(r *rng, h int) (t, m int) {
	nh := len(w.hosts)
	t = drawRank(r, nh, w.tops.hosts)
	if t == h {
		t = (t + 1) % nh
	}
	if n := w.hosts[t].Pages; n > 1 && !r.chance(webFrontShare) {
		m = 1 + drawRank(r, n-1, w.tops.pages[2*t+1])
	}
	return t, m
}
