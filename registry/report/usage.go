package report

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// kindUsage keys the usage figures: u domain 0 metric 0 day target → JSON.
const kindUsage = 'u'

// Usage metrics: each names one count a third party publishes.
const (
	MetricStars      = "stars"
	MetricNPM        = "npm-downloads"
	MetricPyPI       = "pypi-downloads"
	MetricDocker     = "docker-pulls"
	MetricDependents = "dependents"
)

// Metrics lists every metric /usage knows, the default first.
var Metrics = []string{MetricStars, MetricNPM, MetricPyPI, MetricDocker, MetricDependents}

// UsageConfig names the public interfaces /usage reads. An empty base URL
// turns its source off (its figures show as unavailable).
type UsageConfig struct {
	GitHubBase  string // https://api.github.com
	GitHubToken string // optional; raises GitHub's rate limit
	NPMBase     string // https://api.npmjs.org
	PyPIBase    string // https://pypistats.org
	DockerBase  string // https://hub.docker.com
	Client      *http.Client
	// Fresh is how long a figure is served from the cache; zero means 6 h.
	Fresh time.Duration
	// PerSecond and Burst bound the calls to each source (defaults 1 and
	// 10); a figure past the bound is unavailable until the next read.
	PerSecond float64
	Burst     int
}

// DefaultUsageConfig are the public interfaces.
func DefaultUsageConfig() UsageConfig {
	return UsageConfig{GitHubBase: "https://api.github.com", NPMBase: "https://api.npmjs.org",
		PyPIBase: "https://pypistats.org", DockerBase: "https://hub.docker.com"}
}

// Figure is one count read from a third party, or why there is none.
type Figure struct {
	Target    string    `json:"target"` // e.g. owner/repo, a package name
	Source    string    `json:"source"` // the URL read
	Value     *int64    `json:"value"`  // null when unavailable: never 0 for "unknown"
	Available bool      `json:"available"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`     // when it was read
	Cached    bool      `json:"cached"` // served from this registry's cache
}

// UsageDay is the figures recorded on one day.
type UsageDay struct {
	Date    string   `json:"date"`
	Figures []Figure `json:"figures"`
}

// Usage reads the usage metrics of domains.
type Usage struct {
	db      *kv.DB
	now     func() time.Time
	fresh   time.Duration
	sources map[string]*source // by metric
	mu      sync.Mutex         // one reading at a time: the cache absorbs repeats
}

// NewUsage returns a reader of the configured sources.
func NewUsage(db *kv.DB, cfg UsageConfig, now func() time.Time) *Usage {
	if cfg.Client == nil {
		cfg.Client = NewSourceClient()
	}
	if cfg.Fresh <= 0 {
		cfg.Fresh = 6 * time.Hour
	}
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = 1
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 10
	}
	u := &Usage{db: db, now: now, fresh: cfg.Fresh, sources: map[string]*source{}}
	add := func(metric, base string) *source {
		if base == "" {
			return nil
		}
		s := newSource(metric, base, cfg.Client, cfg.PerSecond, cfg.Burst)
		u.sources[metric] = s
		return s
	}
	if s := add(MetricStars, cfg.GitHubBase); s != nil && cfg.GitHubToken != "" {
		s.header.Set("Authorization", "Bearer "+cfg.GitHubToken)
	}
	add(MetricNPM, cfg.NPMBase)
	add(MetricPyPI, cfg.PyPIBase)
	add(MetricDocker, cfg.DockerBase)
	return u
}

// maxTargets bounds the targets read for one domain and metric.
const maxTargets = 10

var (
	githubRepo = regexp.MustCompile(`^https?://(?:www\.)?github\.com/([A-Za-z0-9-]{1,39})/([A-Za-z0-9._-]{1,100})`)
	npmPage    = regexp.MustCompile(`^https?://(?:www\.)?npmjs\.com/package/((?:@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*)`)
	pypiPage   = regexp.MustCompile(`^https?://pypi\.org/project/([A-Za-z0-9._-]{1,100})`)
	dockerPage = regexp.MustCompile(`^https?://hub\.docker\.com/r/([a-z0-9._-]{1,100})/([a-z0-9._-]{1,100})`)
	npmName    = regexp.MustCompile(`^(?:@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$`)
	plainName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	dockerName = regexp.MustCompile(`^(?:docker\.io/)?([a-z0-9._-]{1,100})/([a-z0-9._-]{1,100})(?::[A-Za-z0-9._-]+)?$`)
)

// Targets finds in entry bodies what a metric can be read for: GitHub
// repositories named by URL, and packages named by URL or in an MCP
// server's "packages" (registryType npm, pypi, oci).
func Targets(bodies []json.RawMessage, metric string) []string {
	var out []string
	addT := func(t string) {
		if t != "" && len(out) < maxTargets && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if rt, _ := x["registryType"].(string); rt != "" {
				id, _ := x["identifier"].(string)
				switch {
				case rt == "npm" && metric == MetricNPM && npmName.MatchString(id):
					addT(id)
				case rt == "pypi" && metric == MetricPyPI && plainName.MatchString(id):
					addT(strings.ToLower(id))
				case rt == "oci" && metric == MetricDocker:
					if m := dockerName.FindStringSubmatch(id); m != nil {
						addT(m[1] + "/" + m[2])
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			switch metric {
			case MetricStars, MetricDependents:
				if m := githubRepo.FindStringSubmatch(x); m != nil {
					addT(strings.ToLower(m[1] + "/" + strings.TrimSuffix(m[2], ".git")))
				}
			case MetricNPM:
				if m := npmPage.FindStringSubmatch(x); m != nil {
					addT(m[1])
				}
			case MetricPyPI:
				if m := pypiPage.FindStringSubmatch(x); m != nil {
					addT(strings.ToLower(m[1]))
				}
			case MetricDocker:
				if m := dockerPage.FindStringSubmatch(x); m != nil {
					addT(m[1] + "/" + m[2])
				}
			}
		}
	}
	for _, b := range bodies {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walk(v)
		}
	}
	return out
}

// read asks the metric's source for target.
func (u *Usage) read(ctx context.Context, metric, target string) Figure {
	f := Figure{Target: target, At: u.now().UTC()}
	if metric == MetricDependents {
		f.Reason = "GitHub publishes dependents only on its web pages, not through an interface; this registry does not scrape them"
		return f
	}
	src := u.sources[metric]
	if src == nil {
		f.Reason = "this registry's operator has not configured a source for " + metric
		return f
	}
	path := map[string]string{
		MetricStars:  "/repos/" + target,
		MetricNPM:    "/downloads/point/last-month/" + target,
		MetricPyPI:   "/api/packages/" + url.PathEscape(target) + "/recent",
		MetricDocker: "/v2/repositories/" + target + "/",
	}[metric]
	var (
		body []byte
		err  error
	)
	f.Source, body, err = src.get(ctx, path)
	if err == nil {
		var n int64
		if n, err = parseFigure(metric, body); err == nil {
			f.Value, f.Available = &n, true
			return f
		}
	}
	f.Reason = err.Error()
	return f
}

// parseFigure reads metric's count from a source's answer: a JSON integer
// of at least zero where the source documents it, or errUnexpected.
func parseFigure(metric string, body []byte) (int64, error) {
	var v struct {
		Stars     json.RawMessage `json:"stargazers_count"`
		Downloads json.RawMessage `json:"downloads"`
		Pulls     json.RawMessage `json:"pull_count"`
		Data      struct {
			LastMonth json.RawMessage `json:"last_month"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0, errUnexpected
	}
	switch metric {
	case MetricStars:
		return count(v.Stars)
	case MetricNPM:
		return count(v.Downloads)
	case MetricPyPI:
		return count(v.Data.LastMonth)
	case MetricDocker:
		return count(v.Pulls)
	}
	return 0, errUnexpected
}

func usageKey(domain, metric string, day Day, target string) []byte {
	k := append([]byte{kindUsage}, domain...)
	k = append(k, 0)
	k = append(k, metric...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint32(k, uint32(day))
	return append(k, target...)
}

// Read returns today's figure of metric for each target: from the cache
// when fresh, else read now (a failed read keeps an earlier figure of the
// day, marked cached). Each figure read is recorded for its day.
func (u *Usage) Read(ctx context.Context, domain, metric string, targets []string) ([]Figure, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	today := DayOf(now)
	out := make([]Figure, 0, len(targets))
	for _, t := range targets {
		var cached *Figure
		if err := u.db.ViewReports(func(rb kv.Reports) error {
			if raw := rb.Get(usageKey(domain, metric, today, t)); raw != nil {
				var f Figure
				if json.Unmarshal(raw, &f) == nil {
					cached = &f
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if cached != nil && cached.Available && now.Sub(cached.At) < u.fresh {
			cached.Cached = true
			out = append(out, *cached)
			continue
		}
		f := u.read(ctx, metric, t)
		if !f.Available && cached != nil && cached.Available {
			cached.Cached = true
			cached.Reason = "a fresh read failed (" + f.Reason + "); this is the figure read earlier today"
			out = append(out, *cached)
			continue
		}
		val, _ := json.Marshal(f)
		if err := u.db.UpdateReports(func(rb kv.Reports) error { return rb.Put(usageKey(domain, metric, today, t), val) }); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// History returns the figures recorded for domain and metric over the
// window, one day each (days without a reading are left out).
func (u *Usage) History(domain, metric string, w Window) ([]UsageDay, error) {
	var out []UsageDay
	prefix := append(append(append([]byte{kindUsage}, domain...), 0), append([]byte(metric), 0)...)
	start := binary.BigEndian.AppendUint32(slices.Clone(prefix), uint32(w.From))
	err := u.db.ViewReports(func(rb kv.Reports) error {
		return rb.Scan(prefix, start, func(k, v []byte) (bool, error) {
			if len(k) < len(prefix)+4 {
				return true, nil
			}
			d := Day(binary.BigEndian.Uint32(k[len(prefix):]))
			if d > w.To {
				return false, nil
			}
			var f Figure
			if err := json.Unmarshal(v, &f); err != nil {
				return false, err
			}
			if len(out) == 0 || out[len(out)-1].Date != d.String() {
				out = append(out, UsageDay{Date: d.String()})
			}
			out[len(out)-1].Figures = append(out[len(out)-1].Figures, f)
			return true, nil
		})
	})
	return out, err
}
