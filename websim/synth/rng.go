package synth

import "math"

// mix64 is the splitmix64 finaliser: a fast, well-mixing bijection on uint64.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// hash3 combines a seed, a domain tag and two integers into one key.
func hash3(seed, tag, a, b uint64) uint64 {
	return mix64(seed ^ mix64(tag+0x9e3779b97f4a7c15) ^ mix64(a*0x9e3779b97f4a7c15+b+1))
}

// rng is a splitmix64 stream: deterministic, allocation-free, not for crypto.
type rng struct{ s uint64 }

func newRNG(key uint64) rng { return rng{s: key} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a uniform value in [0, n); n must be > 0.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// chance reports true with probability p.
func (r *rng) chance(p float64) bool { return r.float() < p }

// norm returns a standard normal variate (Box-Muller).
func (r *rng) norm() float64 {
	u := r.float()
	if u < 1e-300 {
		u = 1e-300
	}
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*r.float())
}

// pareto returns a Pareto variate with the given mean and shape alpha > 1.
func (r *rng) pareto(mean, alpha float64) float64 {
	xm := mean * (alpha - 1) / alpha
	u := 1 - r.float() // (0, 1]
	return xm / math.Pow(u, 1/alpha)
}

// zipf returns a rank in [0, n) with P(rank=k) roughly proportional to 1/(k+1):
// a log-uniform draw, cheap and good enough for popularity. The clean and
// hostile profiles draw the hosts of cross-host links with it; the realistic
// profile uses drawRank (webgraph.go).
func (r *rng) zipf(n int) int {
	if n <= 1 {
		return 0
	}
	k := int(math.Exp(r.float()*math.Log(float64(n)+1))) - 1
	if k >= n {
		k = n - 1
	}
	if k < 0 {
		k = 0
	}
	return k
}
