package cover

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
)

// FormatRate renders a rate as "62.5% (5/8, 95% CI 30.6-86.3)", or "- (0/0)".
func FormatRate(r Rate) string {
	if r.Rate == nil {
		return fmt.Sprintf("- (%d/%d)", r.K, r.N)
	}
	return fmt.Sprintf("%.1f%% (%d/%d, %.1f-%.1f)", 100**r.Rate, r.K, r.N, 100**r.WilsonLow, 100**r.WilsonHigh)
}

func formatKappa(k Kappa) string {
	if k.Kappa == nil {
		if k.Observed != nil {
			return fmt.Sprintf("undefined (observed agreement %.3f, n=%d: %s)", *k.Observed, k.N, k.Undefined)
		}
		return fmt.Sprintf("undefined (n=%d: %s)", k.N, k.Undefined)
	}
	return fmt.Sprintf("%.3f (observed %.3f, expected %.3f, n=%d)", *k.Kappa, *k.Observed, *k.Expected, k.N)
}

// WriteTable prints the study as tables, one block per corpus. Rates read
// "rate (k/n, Wilson 95% low-high)".
func (s *Study) WriteTable(w io.Writer) {
	for i, c := range s.Corpora {
		if i > 0 {
			fmt.Fprintln(w)
		}
		name := c.Corpus
		if name == "" {
			name = "(no corpus)"
		}
		fmt.Fprintf(w, "corpus %s: n=%d, %d model(s), gold on %d (%d decidable)\n", name, c.N, len(c.Models), c.Gold, c.GoldDecidable)
		fmt.Fprintf(w, "contested rate: %s\n", FormatRate(c.ContestedRate))
		if len(c.Kappa) == 0 {
			fmt.Fprintln(w, "pairwise kappa: none (one model)")
		} else {
			fmt.Fprintln(w, "pairwise kappa:")
			for _, k := range c.Kappa {
				fmt.Fprintf(w, "  %s ~ %s: %s\n", k.A, k.B, formatKappa(k))
			}
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "router\tover-claim\tunder-claim\tprecision\tcoverage\telimination")
		for _, m := range c.PerModel {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, FormatRate(m.OverClaim), FormatRate(m.UnderClaim), FormatRate(m.Precision), FormatRate(m.Coverage), FormatRate(m.Elimination))
		}
		for _, r := range []Router{c.Majority, c.Unanimous} {
			fmt.Fprintf(tw, "%s\t\t\t%s\t%s\t%s\n", r.Name, FormatRate(r.Precision), FormatRate(r.Coverage), FormatRate(r.Elimination))
		}
		_ = tw.Flush()
		var flips []string
		for _, m := range c.PerModel {
			vs := sortedKeys(m.FlipRate)
			for _, v := range vs {
				flips = append(flips, fmt.Sprintf("  %s under %s: %s", m.Name, v, FormatRate(m.FlipRate[v])))
			}
		}
		if len(flips) > 0 {
			fmt.Fprintln(w, "flip rate:")
			fmt.Fprintln(w, strings.Join(flips, "\n"))
		}
	}
}

// WriteKappaSVG draws the pairwise kappa of every corpus as a heat map:
// one matrix per corpus, blue for agreement beyond chance, red below it,
// grey where kappa is undefined.
func (s *Study) WriteKappaSVG(w io.Writer) error {
	const cell, label, gap = 56, 150, 40
	type block struct {
		c      CorpusStudy
		x, top int
	}
	var blocks []block
	height, width := 40, 20
	for _, c := range s.Corpora {
		size := label + cell*len(c.Models)
		blocks = append(blocks, block{c: c, top: height})
		height += 30 + cell*len(c.Models) + label/2 + gap
		if size+20 > width {
			width = size + 20
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15">Pairwise Cohen's kappa</text>`+"\n")
	for _, bl := range blocks {
		c := bl.c
		idx := map[string]int{}
		for i, m := range c.Models {
			idx[m] = i
		}
		kv := map[[2]int]Kappa{}
		for _, k := range c.Kappa {
			kv[[2]int{idx[k.A], idx[k.B]}] = k
			kv[[2]int{idx[k.B], idx[k.A]}] = k
		}
		y0 := bl.top + 30
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="13">corpus %s (n=%d)</text>`+"\n", bl.top+16, esc(c.Corpus), c.N)
		for i, m := range c.Models {
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", label-6, y0+i*cell+cell/2+4, esc(m))
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" transform="rotate(-40 %d %d)">%s</text>`+"\n",
				label+i*cell+cell/2, y0+len(c.Models)*cell+14, label+i*cell+cell/2, y0+len(c.Models)*cell+14, esc(m))
			for j := range c.Models {
				x, y := label+j*cell, y0+i*cell
				fill, text := "#dddddd", "-"
				if i == j {
					fill, text = "#ffffff", ""
				} else if k := kv[[2]int{i, j}]; k.Kappa != nil {
					fill, text = kappaColor(*k.Kappa), fmt.Sprintf("%.2f", *k.Kappa)
				}
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#888"/>`+"\n", x, y, cell, cell, fill)
				if text != "" {
					fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x+cell/2, y+cell/2+4, text)
				}
			}
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// kappaColor maps kappa in [-1, 1] to red (below chance), white (chance)
// and blue (perfect).
func kappaColor(k float64) string {
	if k > 1 {
		k = 1
	}
	if k < -1 {
		k = -1
	}
	if k >= 0 {
		v := int(255 - 200*k)
		return fmt.Sprintf("#%02x%02xff", v, v)
	}
	v := int(255 + 200*k)
	return fmt.Sprintf("#ff%02x%02x", v, v)
}

func esc(s string) string { return html.EscapeString(s) }

// Routers lists a corpus's routing choices: each model, majority,
// unanimous, for the cost model.
func (c CorpusStudy) Routers() []Router {
	out := make([]Router, 0, len(c.PerModel)+2)
	for _, m := range c.PerModel {
		out = append(out, m.Router)
	}
	out = append(out, c.Majority, c.Unanimous)
	return out
}
