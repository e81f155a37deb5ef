// Package metrics defines the Prometheus metrics of a control-plane node.
// Every method is safe on a nil *Metrics (metrics off), so components take
// one optionally.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the node's collectors.
type Metrics struct {
	Registry *prometheus.Registry

	decisions     *prometheus.CounterVec
	decisionTime  *prometheus.HistogramVec
	quotaRefusals *prometheus.CounterVec
	logbookAppend prometheus.Histogram
	pilotRefusals *prometheus.CounterVec
	judgments     *prometheus.CounterVec
	dissent       *prometheus.CounterVec
	jurorVerdicts *prometheus.CounterVec
	fastPath      *prometheus.CounterVec
	clockSkew     prometheus.Gauge
	clockBeyond   prometheus.Gauge
	leadsman      *prometheus.CounterVec
}

// Queue reports the waiting requests for the queue gauges.
type Queue func(ctx context.Context) (depth int, oldest time.Duration, err error)

// Switches reports the node's switch view for the switch gauges.
type Switches interface {
	TierBOn(target string) (bool, string)
	Staleness() time.Duration
	Failures() int64
}

// New registers every collector. targets name the targets for the switch
// gauges; queue and sw are read at scrape time.
func New(targets []string, queue Queue, sw Switches) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{Registry: r,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_decisions_total",
			Help: "Statements decided, by path (compiled, surveyed, approved, none) and outcome (executed, referred, rejected)."}, []string{"path", "outcome"}),
		decisionTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "harbormaster_decision_seconds",
			Help:    "Time from a statement's arrival to its answer, by path and outcome.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"path", "outcome"}),
		quotaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_quota_refusals_total",
			Help: "Fast-path statements referred because a quota was used up, by kind (delegation, principal)."}, []string{"kind"}),
		logbookAppend: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "harbormaster_logbook_append_seconds",
			Help:    "Durable logbook append latency (group commit included).",
			Buckets: []float64{.0001, .0005, .001, .002, .005, .01, .02, .05, .1, .5, 1}}),
		pilotRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_pilot_refusals_total",
			Help: "Statements the Pilot rolled back or refused, by code (fence_violation, max_rows_exceeded, ...)."}, []string{"code"}),
	}
	m.judgments = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_surveyor_judgments_total",
		Help: "Surveyor judgments by outcome (conforms, refer), whether the panel disagreed, and whether it was correlated."}, []string{"outcome", "disagreement", "correlated"})
	m.jurorVerdicts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_surveyor_juror_answers_total",
		Help: "Juror answers by framing and answer (conforms, refer, failed)."}, []string{"framing", "answer"})
	m.dissent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_surveyor_dissent_total",
		Help: "Juror answers of refer or failure in a judgment where another juror answered conforms, by framing."}, []string{"framing"})
	m.fastPath = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_fast_path_statements_total",
		Help: "Statements executed without a human, by path and delegation."}, []string{"path", "delegation"})
	m.clockSkew = prometheus.NewGauge(prometheus.GaugeOpts{Name: "harbormaster_clock_skew_seconds",
		Help: "The control store's clock minus this node's, as last measured (0 when the store is on this machine)."})
	m.clockBeyond = prometheus.NewGauge(prometheus.GaugeOpts{Name: "harbormaster_clock_skew_beyond_leeway",
		Help: "1 while this node's clock is off the store's by more than the leeway: its expiry decisions then hold at both clocks."})
	m.leadsman = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "harbormaster_leadsman_notes_total",
		Help: "Leadsman notes on referred requests, by result (written, failed). Advisory: no decision reads them."}, []string{"result"})
	r.MustRegister(m.judgments, m.jurorVerdicts, m.dissent, m.fastPath, m.clockSkew, m.clockBeyond, m.leadsman)
	r.MustRegister(m.decisions, m.decisionTime, m.quotaRefusals, m.logbookAppend, m.pilotRefusals,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	if queue != nil {
		depth := prometheus.NewDesc("harbormaster_queue_depth", "Requests waiting for a human.", nil, nil)
		oldest := prometheus.NewDesc("harbormaster_queue_oldest_waiting_seconds", "Age of the oldest waiting request.", nil, nil)
		r.MustRegister(collectorFunc{descs: []*prometheus.Desc{depth, oldest}, collect: func(ch chan<- prometheus.Metric) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			d, o, err := queue(ctx)
			if err != nil {
				return
			}
			ch <- prometheus.MustNewConstMetric(depth, prometheus.GaugeValue, float64(d))
			ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, o.Seconds())
		}})
	}
	if sw != nil {
		// The switch's name is a label: in a metric name, tier_b's "b" reads
		// as a unit (bytes) to promtool's lint.
		on := prometheus.NewDesc("harbormaster_switch_enabled", "1 when the switch (tier_b) is on for the target on this node.", []string{"switch", "target"}, nil)
		stale := prometheus.NewDesc("harbormaster_switch_poll_staleness_seconds", "Time since this node last read the switches.", nil, nil)
		fails := prometheus.NewDesc("harbormaster_switch_poll_failures_total", "Failed switch reads on this node.", nil, nil)
		r.MustRegister(collectorFunc{descs: []*prometheus.Desc{on, stale, fails}, collect: func(ch chan<- prometheus.Metric) {
			for _, t := range targets {
				v := 0.0
				if ok, _ := sw.TierBOn(t); ok {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(on, prometheus.GaugeValue, v, "tier_b", t)
			}
			st := sw.Staleness()
			if st > 24*time.Hour {
				st = 24 * time.Hour
			}
			ch <- prometheus.MustNewConstMetric(stale, prometheus.GaugeValue, st.Seconds())
			ch <- prometheus.MustNewConstMetric(fails, prometheus.CounterValue, float64(sw.Failures()))
		}})
	}
	m.initLabelSets()
	return m
}

// The label values the metrics take, each series created at zero at start
// so that an alert over a rate or a ratio can fire before the first event
// and after a restart (a series that does not exist yet has no rate).
var (
	decisionPaths    = []string{"compiled", "surveyed", "approved", "none"}
	decisionOutcomes = []string{"executed", "referred", "rejected"}
	quotaKinds       = []string{"delegation", "principal"}
	judgmentOutcomes = []string{"conforms", "refer"}
	jurorAnswers     = []string{"conforms", "refer", "failed"}
	bools            = []string{"false", "true"}
)

func (m *Metrics) initLabelSets() {
	for _, p := range decisionPaths {
		for _, o := range decisionOutcomes {
			m.decisions.WithLabelValues(p, o)
			m.decisionTime.WithLabelValues(p, o)
		}
	}
	for _, k := range quotaKinds {
		m.quotaRefusals.WithLabelValues(k)
	}
	for _, o := range judgmentOutcomes {
		for _, d := range bools {
			for _, c := range bools {
				m.judgments.WithLabelValues(o, d, c)
			}
		}
	}
}

// InitFramings creates the per-framing series of the Surveyor's juror
// answers and dissent at zero, so HarbormasterFramingNeverDissents and
// HarbormasterShapeScreenOutsideBand can fire before a framing's first
// dissent and after a restart.
func (m *Metrics) InitFramings(framings []string) {
	if m == nil {
		return
	}
	for _, f := range framings {
		m.dissent.WithLabelValues(f)
		for _, a := range jurorAnswers {
			m.jurorVerdicts.WithLabelValues(f, a)
		}
	}
}

// InitDelegation creates a delegation's fast-path series at zero, so a
// surge alert's rate starts from its first statement.
func (m *Metrics) InitDelegation(id string) {
	if m == nil {
		return
	}
	for _, p := range []string{"compiled", "surveyed"} {
		m.fastPath.WithLabelValues(p, id)
	}
}

// BuildInfo is what harbormaster_build_info carries as labels.
type BuildInfo struct {
	Version, Commit, GoVersion, Compiler, Checker, Bundle string
}

// RegisterBuildInfo adds harbormaster_build_info, 1 with the binary's
// version, commit, Go version, compiler and checker versions and the
// prompt bundle in force as labels (as harbormaster version prints them).
func (m *Metrics) RegisterBuildInfo(b BuildInfo) {
	if m == nil {
		return
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "harbormaster_build_info",
		Help: "1, labelled with the binary's version, commit, Go version, compiler, checker and prompt bundle in force."},
		[]string{"version", "commit", "goversion", "compiler", "checker", "prompt_bundle"})
	g.WithLabelValues(b.Version, b.Commit, b.GoVersion, b.Compiler, b.Checker, b.Bundle).Set(1)
	m.Registry.MustRegister(g)
}

type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// Decision records one answered statement.
func (m *Metrics) Decision(path, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	if path == "" {
		path = "none"
	}
	m.decisions.WithLabelValues(path, outcome).Inc()
	m.decisionTime.WithLabelValues(path, outcome).Observe(took.Seconds())
}

// LeadsmanNote records one Leadsman note, written or failed.
func (m *Metrics) LeadsmanNote(result string) {
	if m != nil {
		m.leadsman.WithLabelValues(result).Inc()
	}
}

// QuotaRefusal records a quota referral.
func (m *Metrics) QuotaRefusal(kind string) {
	if m != nil {
		m.quotaRefusals.WithLabelValues(kind).Inc()
	}
}

// LogbookAppend records one append's latency.
func (m *Metrics) LogbookAppend(took time.Duration) {
	if m != nil {
		m.logbookAppend.Observe(took.Seconds())
	}
}

// PilotRefusal records a Pilot refusal.
func (m *Metrics) PilotRefusal(code string) {
	if m != nil && code != "" {
		m.pilotRefusals.WithLabelValues(code).Inc()
	}
}

// Judgment is what the metrics need of a Surveyor judgment.
type Judgment interface {
	MetricOutcome() string
	MetricCorrelated() bool
	MetricJurors() (framings []string, answers []string)
}

// Judgment records one panel: outcome, disagreement, and per-framing
// answers and dissent (a framing that never dissents contributes nothing).
func (m *Metrics) Judgment(j Judgment) {
	if m == nil {
		return
	}
	framings, answers := j.MetricJurors()
	anyConforms, anyOther := false, false
	for _, a := range answers {
		if a == "conforms" {
			anyConforms = true
		} else {
			anyOther = true
		}
	}
	disagreement := anyConforms && anyOther
	for i, f := range framings {
		m.jurorVerdicts.WithLabelValues(f, answers[i]).Inc()
		if disagreement && answers[i] != "conforms" {
			m.dissent.WithLabelValues(f).Inc()
		}
	}
	corr := "false"
	if j.MetricCorrelated() {
		corr = "true"
	}
	dis := "false"
	if disagreement {
		dis = "true"
	}
	m.judgments.WithLabelValues(j.MetricOutcome(), dis, corr).Inc()
}

// FastPath records a statement executed without a human.
func (m *Metrics) FastPath(path, delegation string) {
	if m != nil {
		m.fastPath.WithLabelValues(path, delegation).Inc()
	}
}

// AuditStats reports the audit queue for the audit gauges.
type AuditStats func(ctx context.Context) (pending int, oldest time.Duration, failureRate float64, err error)

// RegisterAudit adds the audit gauges.
func (m *Metrics) RegisterAudit(stats AuditStats) {
	if m == nil || stats == nil {
		return
	}
	pending := prometheus.NewDesc("harbormaster_audit_queue_depth", "Sampled judgments waiting for review.", nil, nil)
	oldest := prometheus.NewDesc("harbormaster_audit_queue_oldest_seconds", "Age of the oldest sampled judgment waiting for review.", nil, nil)
	fail := prometheus.NewDesc("harbormaster_audit_failure_ratio", "Share of reviews that found a wrong Surveyor verdict.", nil, nil)
	m.Registry.MustRegister(collectorFunc{descs: []*prometheus.Desc{pending, oldest, fail}, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		p, o, f, err := stats(ctx)
		if err != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(p))
		ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, o.Seconds())
		ch <- prometheus.MustNewConstMetric(fail, prometheus.GaugeValue, f)
	}})
}

// RegisterShapeBand exports the shape screen's expected-dissent band
// (config surveyor.shape_dissent_band) so alert rules compare against it: a
// framing that never dissents contributes nothing, and one that always
// dissents blocks every conforms.
func (m *Metrics) RegisterShapeBand(low, high float64) {
	if m == nil {
		return
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "harbormaster_surveyor_shape_dissent_band",
		Help: "The shape screen's expected dissent share: bound=low|high."}, []string{"bound"})
	g.WithLabelValues("low").Set(low)
	g.WithLabelValues("high").Set(high)
	m.Registry.MustRegister(g)
}

// ClockSkew records the last measured offset of the store's clock from this
// node's, and whether it is beyond the leeway.
func (m *Metrics) ClockSkew(offset time.Duration, beyond bool) {
	if m == nil {
		return
	}
	m.clockSkew.Set(offset.Seconds())
	v := 0.0
	if beyond {
		v = 1
	}
	m.clockBeyond.Set(v)
}
