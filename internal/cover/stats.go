package cover

import "math"

// Rate is a share with its Wilson 95% score interval. Over zero items the
// rate and both bounds are null (nil), never NaN.
type Rate struct {
	K          int      `json:"k"`
	N          int      `json:"n"`
	Rate       *float64 `json:"rate"`
	WilsonLow  *float64 `json:"wilson_low"`
	WilsonHigh *float64 `json:"wilson_high"`
}

// wilsonZ is the normal quantile of a two-sided 95% interval.
const wilsonZ = 1.959963984540054

// NewRate is k of n with its Wilson interval. It panics on k < 0 or k > n,
// which is a bug in the caller.
func NewRate(k, n int) Rate {
	if k < 0 || k > n {
		panic("cover: rate with k outside [0, n]")
	}
	r := Rate{K: k, N: n}
	if n == 0 {
		return r
	}
	lo, hi := Wilson(k, n)
	p := float64(k) / float64(n)
	r.Rate, r.WilsonLow, r.WilsonHigh = &p, &lo, &hi
	return r
}

// Wilson is the Wilson 95% score interval of k successes in n > 0 trials.
func Wilson(k, n int) (lo, hi float64) {
	nf := float64(n)
	p := float64(k) / nf
	z2 := wilsonZ * wilsonZ
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := wilsonZ * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return math.Max(0, center-half), math.Min(1, center+half)
}

// Kappa is Cohen's kappa between two raters over the items both labelled.
type Kappa struct {
	A string `json:"a"`
	B string `json:"b"`
	// N is the number of items both labelled.
	N int `json:"n"`
	// Observed is the observed agreement po (null over 0 items).
	Observed *float64 `json:"observed"`
	// Expected is the chance agreement pe from the two raters' marginals.
	Expected *float64 `json:"expected"`
	// Kappa is (po - pe) / (1 - pe); null when N is 0 or pe is 1 (both raters
	// gave one and the same label to every item: agreement is perfect but
	// says nothing beyond chance, so kappa is undefined). Undefined says why.
	Kappa     *float64 `json:"kappa"`
	Undefined string   `json:"undefined,omitempty"`
}

// CohenKappa computes kappa over paired binary labels (true = DECIDABLE).
func CohenKappa(a, b string, x, y []bool) Kappa {
	k := Kappa{A: a, B: b, N: len(x)}
	if len(x) != len(y) {
		panic("cover: kappa over unpaired labels")
	}
	if len(x) == 0 {
		k.Undefined = "no item labelled by both"
		return k
	}
	var agree, ax, by int
	for i := range x {
		if x[i] == y[i] {
			agree++
		}
		if x[i] {
			ax++
		}
		if y[i] {
			by++
		}
	}
	n := float64(len(x))
	po := float64(agree) / n
	pa, pb := float64(ax)/n, float64(by)/n
	pe := pa*pb + (1-pa)*(1-pb)
	k.Observed, k.Expected = &po, &pe
	if pe >= 1 {
		k.Undefined = "expected agreement is 1: both models gave one and the same label to every item"
		return k
	}
	kv := (po - pe) / (1 - pe)
	k.Kappa = &kv
	return k
}
