package cover

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// The two labels a panel model gives a clause.
const (
	Decidable = "DECIDABLE"
	Judgment  = "JUDGMENT"
)

// MaxLabelBytes bounds a label file.
const MaxLabelBytes = 64 << 20

// Label is one line of a label file: model's label for predicate, in a
// corpus, under a rubric variant ("" is the base rubric), with the
// predicate's gold label when known.
type Label struct {
	Predicate string `json:"predicate"`
	Corpus    string `json:"corpus"`
	Model     string `json:"model"`
	Label     string `json:"label"`
	Gold      string `json:"gold"`
	Variant   string `json:"variant"`
}

// LabelHeader is the CSV header of a label file.
var LabelHeader = []string{"predicate", "corpus", "model", "label", "gold", "variant"}

// ParseLabels reads a label file: CSV with LabelHeader, or JSON lines of
// Label objects (the first non-blank byte '{' tells them apart). Every
// error names the line.
func ParseLabels(data []byte) ([]Label, error) {
	if len(data) > MaxLabelBytes {
		return nil, fmt.Errorf("cover: label file over %d bytes", MaxLabelBytes)
	}
	var ls []Label
	var err error
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
		ls, err = parseLabelsJSON(data)
	} else {
		ls, err = parseLabelsCSV(data)
	}
	if err != nil {
		return nil, err
	}
	if err := validateLabels(ls); err != nil {
		return nil, err
	}
	return ls, nil
}

func parseLabelsCSV(data []byte) ([]Label, error) {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	r.FieldsPerRecord = len(LabelHeader)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("cover: label file: header: %w", err)
	}
	for i, h := range LabelHeader {
		if strings.TrimSpace(strings.ToLower(head[i])) != h {
			return nil, fmt.Errorf("cover: label file: the header must be %s", strings.Join(LabelHeader, ","))
		}
	}
	var out []Label
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cover: label file: %w", err)
		}
		line, _ := r.FieldPos(0)
		l := Label{Predicate: rec[0], Corpus: rec[1], Model: rec[2], Label: rec[3], Gold: rec[4], Variant: rec[5]}
		if err := normalize(&l); err != nil {
			return nil, fmt.Errorf("cover: label file: line %d: %w", line, err)
		}
		out = append(out, l)
	}
}

func parseLabelsJSON(data []byte) ([]Label, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	var out []Label
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var l Label
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("cover: label file: line %d: %w", n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("cover: label file: line %d: text after the JSON object", n)
		}
		if err := normalize(&l); err != nil {
			return nil, fmt.Errorf("cover: label file: line %d: %w", n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cover: label file: %w", err)
	}
	return out, nil
}

func normalize(l *Label) error {
	l.Predicate, l.Corpus, l.Model, l.Variant = strings.TrimSpace(l.Predicate), strings.TrimSpace(l.Corpus), strings.TrimSpace(l.Model), strings.TrimSpace(l.Variant)
	l.Label, l.Gold = strings.ToUpper(strings.TrimSpace(l.Label)), strings.ToUpper(strings.TrimSpace(l.Gold))
	switch {
	case l.Predicate == "":
		return errors.New("predicate is empty")
	case l.Model == "":
		return errors.New("model is empty")
	case l.Label != Decidable && l.Label != Judgment:
		return fmt.Errorf("label must be DECIDABLE or JUDGMENT, got %q", l.Label)
	case l.Gold != "" && l.Gold != Decidable && l.Gold != Judgment:
		return fmt.Errorf("gold must be DECIDABLE, JUDGMENT or empty, got %q", l.Gold)
	}
	return nil
}

func validateLabels(ls []Label) error {
	type key struct{ c, p, m, v string }
	seen := map[key]bool{}
	gold := map[[2]string]string{}
	for _, l := range ls {
		k := key{l.Corpus, l.Predicate, l.Model, l.Variant}
		if seen[k] {
			return fmt.Errorf("cover: label file: model %q labels predicate %q of corpus %q twice under variant %q", l.Model, l.Predicate, l.Corpus, l.Variant)
		}
		seen[k] = true
		if l.Gold == "" {
			continue
		}
		pk := [2]string{l.Corpus, l.Predicate}
		if g, ok := gold[pk]; ok && g != l.Gold {
			return fmt.Errorf("cover: label file: predicate %q of corpus %q has two gold labels, %s and %s", l.Predicate, l.Corpus, g, l.Gold)
		}
		gold[pk] = l.Gold
	}
	return nil
}

// Study is the measures of a label file, per corpus.
type Study struct {
	Corpora []CorpusStudy `json:"corpora"`
}

// CorpusStudy is the measures of one corpus.
type CorpusStudy struct {
	Corpus string `json:"corpus"`
	// N is the number of predicates with a base-rubric label.
	N int `json:"n"`
	// Models are the models with base-rubric labels, sorted.
	Models []string `json:"models"`
	// Gold is the number of predicates with a gold label, and Decidable of
	// them gold DECIDABLE.
	Gold          int `json:"gold"`
	GoldDecidable int `json:"gold_decidable"`
	// ContestedRate is the share of predicates labelled by every model
	// whose labels are not unanimous.
	ContestedRate Rate `json:"contested_rate"`
	// Kappa is Cohen's kappa for every model pair.
	Kappa []Kappa `json:"kappa"`
	// PerModel is each model's routing as a router.
	PerModel []ModelStudy `json:"per_model"`
	// Unanimous and Majority are the panels' routers: predicates labelled
	// by every model and all (more than half) DECIDABLE.
	Unanimous Router `json:"unanimous"`
	Majority  Router `json:"majority"`
}

// ModelStudy is one model's measures.
type ModelStudy struct {
	Router
	// OverClaim is gold JUDGMENT labelled DECIDABLE, over gold JUDGMENT.
	OverClaim Rate `json:"over_claim"`
	// UnderClaim is gold DECIDABLE labelled JUDGMENT, over gold DECIDABLE.
	UnderClaim Rate `json:"under_claim"`
	// FlipRate is, per variant, the share of predicates whose label under
	// that variant differs from the base label.
	FlipRate map[string]Rate `json:"flip_rate"`
}

// Router is a routing choice measured against gold: the set it sends to a
// fixed check instead of a judge.
type Router struct {
	Name string `json:"name"`
	// Precision is gold DECIDABLE over the predicates it routes to a check
	// (those with gold).
	Precision Rate `json:"precision"`
	// Coverage is how many gold-DECIDABLE predicates it routes to a check.
	Coverage Rate `json:"coverage"`
	// Elimination is the share of all predicates it removes from the judge.
	Elimination Rate `json:"elimination"`
}

// NewRouter measures a routing choice: routed[p] says whether predicate p
// goes to a check; gold[p] is "" when unknown. Elimination counts every
// predicate of all.
func NewRouter(name string, all []string, routed map[string]bool, gold map[string]string) Router {
	var elim, prec, precN, cov, covN int
	for _, p := range all {
		if routed[p] {
			elim++
		}
		switch gold[p] {
		case Decidable:
			covN++
			if routed[p] {
				cov++
				prec++
				precN++
			}
		case Judgment:
			if routed[p] {
				precN++
			}
		}
	}
	return Router{Name: name, Precision: NewRate(prec, precN), Coverage: NewRate(cov, covN), Elimination: NewRate(elim, len(all))}
}

// Measure computes the study of a label file.
func Measure(ls []Label) *Study {
	byCorpus := map[string][]Label{}
	for _, l := range ls {
		byCorpus[l.Corpus] = append(byCorpus[l.Corpus], l)
	}
	names := make([]string, 0, len(byCorpus))
	for c := range byCorpus {
		names = append(names, c)
	}
	sort.Strings(names)
	s := &Study{Corpora: []CorpusStudy{}}
	for _, c := range names {
		s.Corpora = append(s.Corpora, measureCorpus(c, byCorpus[c]))
	}
	return s
}

func measureCorpus(corpus string, ls []Label) CorpusStudy {
	base := map[string]map[string]bool{}               // model -> predicate -> decidable
	variant := map[string]map[string]map[string]bool{} // model -> variant -> predicate -> decidable
	gold := map[string]string{}
	preds := map[string]bool{}
	for _, l := range ls {
		if l.Gold != "" {
			gold[l.Predicate] = l.Gold
		}
		d := l.Label == Decidable
		if l.Variant == "" {
			if base[l.Model] == nil {
				base[l.Model] = map[string]bool{}
			}
			base[l.Model][l.Predicate] = d
			preds[l.Predicate] = true
			continue
		}
		if variant[l.Model] == nil {
			variant[l.Model] = map[string]map[string]bool{}
		}
		if variant[l.Model][l.Variant] == nil {
			variant[l.Model][l.Variant] = map[string]bool{}
		}
		variant[l.Model][l.Variant][l.Predicate] = d
	}
	models := sortedKeys(base)
	all := sortedKeys(preds)
	cs := CorpusStudy{Corpus: corpus, N: len(all), Models: models, Kappa: []Kappa{}, PerModel: []ModelStudy{}}
	for _, p := range all {
		if g := gold[p]; g != "" {
			cs.Gold++
			if g == Decidable {
				cs.GoldDecidable++
			}
		}
	}
	// complete: predicates every model labelled; the panels route only those.
	var complete []string
	contested := 0
	unan, maj := map[string]bool{}, map[string]bool{}
	for _, p := range all {
		dec, n := 0, 0
		for _, m := range models {
			if d, ok := base[m][p]; ok {
				n++
				if d {
					dec++
				}
			}
		}
		if n != len(models) {
			continue
		}
		complete = append(complete, p)
		if dec != 0 && dec != n {
			contested++
		}
		unan[p] = dec == n
		maj[p] = 2*dec > n
	}
	cs.ContestedRate = NewRate(contested, len(complete))
	for i, a := range models {
		for _, b := range models[i+1:] {
			var x, y []bool
			for _, p := range all {
				da, oka := base[a][p]
				db, okb := base[b][p]
				if oka && okb {
					x, y = append(x, da), append(y, db)
				}
			}
			cs.Kappa = append(cs.Kappa, CohenKappa(a, b, x, y))
		}
	}
	for _, m := range models {
		labelled := sortedKeys(base[m])
		ms := ModelStudy{Router: NewRouter(m, labelled, base[m], gold), FlipRate: map[string]Rate{}}
		var over, overN, under, underN int
		for _, p := range labelled {
			switch gold[p] {
			case Judgment:
				overN++
				if base[m][p] {
					over++
				}
			case Decidable:
				underN++
				if !base[m][p] {
					under++
				}
			}
		}
		ms.OverClaim, ms.UnderClaim = NewRate(over, overN), NewRate(under, underN)
		for v, vl := range variant[m] {
			flips, n := 0, 0
			for p, d := range vl {
				if b, ok := base[m][p]; ok {
					n++
					if b != d {
						flips++
					}
				}
			}
			ms.FlipRate[v] = NewRate(flips, n)
		}
		cs.PerModel = append(cs.PerModel, ms)
	}
	cs.Unanimous = NewRouter("unanimous", complete, unan, gold)
	cs.Majority = NewRouter("majority", complete, maj, gold)
	return cs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
