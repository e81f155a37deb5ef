package sqlcheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// corpusRoot is the adversarial corpus (testdata/corpus/README.md).
var corpusRoot = filepath.Join("..", "..", "testdata", "corpus")

// corpusCase is one case of testdata/corpus/cases/*.yaml.
type corpusCase struct {
	Name       string `yaml:"name"`
	Delegation string `yaml:"delegation"`
	SQL        string `yaml:"sql"`
	Expect     string `yaml:"expect"`
	Reason     string `yaml:"reason"`
	Why        string `yaml:"why"`
}

// corpusFile is one cases/*.yaml file, its cases in file order.
type corpusFile struct {
	Stem  string // "must_pass"
	Cases []corpusCase
}

// corpus is the loaded corpus: the schema, every delegation compiled with
// bound.Compile, and every case file.
type corpus struct {
	Checker *sqlcheck.Checker
	Rules   map[string][]sqlcheck.Rule // by delegation file stem
	Files   []corpusFile               // sorted by stem
}

var (
	corpusOnce sync.Once
	corpusVal  *corpus
	corpusErr  error
)

// loadCorpus parses the schema and compiles every delegation once per test
// binary; every caller shares the result, which is read-only.
func loadCorpus(tb testing.TB) *corpus {
	tb.Helper()
	corpusOnce.Do(func() { corpusVal, corpusErr = readCorpus() })
	if corpusErr != nil {
		tb.Fatalf("load corpus: %v", corpusErr)
	}
	return corpusVal
}

func readCorpus() (*corpus, error) {
	ddl, err := os.ReadFile(filepath.Join(corpusRoot, "schema.sql"))
	if err != nil {
		return nil, err
	}
	cat, err := sqlcheck.ParseSchemaDDL(string(ddl), nil)
	if err != nil {
		return nil, err
	}
	c := &corpus{Checker: &sqlcheck.Checker{Catalog: cat}, Rules: map[string][]sqlcheck.Rule{}}
	dfiles, err := filepath.Glob(filepath.Join(corpusRoot, "delegations", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(dfiles) == 0 {
		return nil, fmt.Errorf("no delegations under %s", corpusRoot)
	}
	for _, f := range dfiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := bound.Parse(data, f)
		if err != nil {
			return nil, err
		}
		b, rep := bound.Compile(d, cat, bound.Options{})
		if b == nil || !rep.Signable {
			return nil, fmt.Errorf("%s is not signable: %+v", f, rep.Problems)
		}
		rules, err := b.CheckRules()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		c.Rules[strings.TrimSuffix(filepath.Base(f), ".yaml")] = rules
	}
	cfiles, err := filepath.Glob(filepath.Join(corpusRoot, "cases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(cfiles)
	seen := map[string]string{}
	for _, f := range cfiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var cases []corpusCase
		if err := yaml.Unmarshal(data, &cases); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		stem := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for _, cc := range cases {
			if cc.Name == "" {
				return nil, fmt.Errorf("%s: a case without a name", f)
			}
			if prev, dup := seen[cc.Name]; dup {
				return nil, fmt.Errorf("%s: case %s already in %s", f, cc.Name, prev)
			}
			seen[cc.Name] = stem
			if _, ok := c.Rules[cc.Delegation]; !ok {
				return nil, fmt.Errorf("%s: case %s names unknown delegation %q", f, cc.Name, cc.Delegation)
			}
			switch sqlcheck.Outcome(cc.Expect) {
			case sqlcheck.Conforms, sqlcheck.Survey, sqlcheck.Refer:
			default:
				return nil, fmt.Errorf("%s: case %s expects %q", f, cc.Name, cc.Expect)
			}
		}
		c.Files = append(c.Files, corpusFile{Stem: stem, Cases: cases})
	}
	return c, nil
}

// allCases returns every case of every file, in file order.
func (c *corpus) allCases() []corpusCase {
	var out []corpusCase
	for _, f := range c.Files {
		out = append(out, f.Cases...)
	}
	return out
}

// reasonCodes returns the decision's reason codes, sorted (duplicates kept).
func reasonCodes(d sqlcheck.Decision) []string {
	out := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		out[i] = r.Code
	}
	sort.Strings(out)
	return out
}
