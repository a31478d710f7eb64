package facilitator

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/web"
)

// The probed paths of a network, as the probe scheduler names them.
const (
	// ProbePathRPC is the network's JSON-RPC (a chain id read).
	ProbePathRPC = "rpc"
	// ProbePathSettle is the settle path (the network can settle and its
	// token answers a read-only call).
	ProbePathSettle = "settle"
)

// MinProbes is the number of probes below which availability is withheld,
// as the spec requires; the probe package applies the same threshold.
const MinProbes = 5

// AvailabilitySource reports the observed availability of a network's probed
// paths. The CLI adapts the probe scheduler to it, so this package never
// imports probe.
type AvailabilitySource interface {
	// NetworkAvailability returns the paths probed for network (a CAIP-2
	// id); none when the network is not probed.
	NetworkAvailability(network string) ([]PathAvailability, error)
}

// PathAvailability is the observed availability of one probed path of a
// network, over the probe window.
type PathAvailability struct {
	Path      string `json:"path"`
	Probes    int64  `json:"probes"`
	Successes int64  `json:"successes"`
	// LowerBound is the Wilson score lower bound (95%) of the success
	// ratio, in [0, 1]; null while fewer than MinProbes probes ran.
	LowerBound *float64 `json:"lowerBound"`
	// Withheld says why LowerBound is null.
	Withheld    string     `json:"withheld,omitempty"`
	WindowDays  int        `json:"windowDays,omitempty"`
	LastProbeAt *time.Time `json:"lastProbeAt,omitempty"`
	LastOK      *bool      `json:"lastOk,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
}

// StatusDocument is the body of GET /status.json and what GET /status shows.
type StatusDocument struct {
	Service     string    `json:"service"`
	Version     string    `json:"version"`
	GeneratedAt time.Time `json:"generatedAt"`
	// Status is "ok" when every network can settle, "degraded" when some
	// can, "unavailable" when none can.
	Status      string          `json:"status"`
	Method      StatusMethod    `json:"method"`
	Networks    []NetworkStatus `json:"networks"`
	Screening   ScreeningStatus `json:"screening"`
	Settlements SettlementTotal `json:"settlements"`
}

// StatusMethod says how availability is computed, so a reader can judge it.
type StatusMethod struct {
	Availability string  `json:"availability"`
	Confidence   float64 `json:"confidence"`
	MinProbes    int     `json:"minProbes"`
}

// NetworkStatus is one network in the status document.
type NetworkStatus struct {
	Network   string `json:"network"`
	V1Network string `json:"v1Network,omitempty"`
	// Available and Reason are the network's state now.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// Observed is the probes' availability per path, rpc then settle.
	Observed    []PathAvailability  `json:"observed"`
	Settlements settle.NetworkStats `json:"settlements"`
}

// ScreeningStatus is the state of the sanctions list.
type ScreeningStatus struct {
	Enabled     bool       `json:"enabled"`
	Source      string     `json:"source,omitempty"`
	Size        int        `json:"size"`
	Ignored     int        `json:"ignored"`
	SHA256      string     `json:"sha256,omitempty"`
	LoadedAt    *time.Time `json:"loadedAt,omitempty"`
	FileModTime *time.Time `json:"fileModTime,omitempty"`
	// AgeSeconds is how old the list file is (now - FileModTime): a list
	// nobody refreshes screens against yesterday's sanctions.
	AgeSeconds *int64 `json:"ageSeconds,omitempty"`
	LastError  string `json:"lastError,omitempty"`
}

// SettlementTotal is the settlement counts over all networks; the
// per-network split is in each NetworkStatus.
type SettlementTotal struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	InFlight  int   `json:"inFlight"`
	// Reconciliation is the state of settlements a previous process left
	// pending (those waiting for their network, those whose chain is gone).
	Reconciliation settle.Reconciliation `json:"reconciliation"`
	// Unknown counts payments naming a network this facilitator does not
	// serve.
	Unknown settle.NetworkStats `json:"unknownNetwork"`
}

func (s *Service) nowUTC() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) binaryVersion() string {
	if s.cfg.Version == "" {
		return "dev"
	}
	return s.cfg.Version
}

// status builds the status document from the live state.
func (s *Service) status() StatusDocument {
	now := s.nowUTC()
	stats := s.engine.Stats()
	doc := StatusDocument{
		Service:     "ardx facilitator",
		Version:     s.binaryVersion(),
		GeneratedAt: now,
		Method: StatusMethod{
			Availability: "Wilson score lower bound of the probe success ratio",
			Confidence:   0.95,
			MinProbes:    MinProbes,
		},
		Networks: make([]NetworkStatus, 0, len(s.cfg.Networks)),
		Settlements: SettlementTotal{
			Succeeded: stats.Succeeded, Failed: stats.Failed, InFlight: stats.InFlight,
			Reconciliation: stats.Reconciliation,
			Unknown:        stats.Networks["unknown"],
		},
	}
	up := 0
	for _, n := range s.cfg.Networks {
		ok, reason := n.Available()
		if ok {
			up++
		} else if reason == "" {
			reason = "the network cannot settle now"
		}
		doc.Networks = append(doc.Networks, NetworkStatus{
			Network:     n.ID(),
			V1Network:   n.V1Name(),
			Available:   ok,
			Reason:      reason,
			Observed:    s.observed(n.ID()),
			Settlements: stats.Networks[n.ID()],
		})
	}
	switch {
	case up == len(s.cfg.Networks):
		doc.Status = "ok"
	case up > 0:
		doc.Status = "degraded"
	default:
		doc.Status = "unavailable"
	}
	doc.Screening = s.screeningStatus(now)
	return doc
}

// observed returns a network's probed paths; a network without probes (or
// whose counters cannot be read) shows both paths withheld, never a guess.
func (s *Service) observed(network string) []PathAvailability {
	if s.cfg.Availability != nil {
		paths, err := s.cfg.Availability.NetworkAvailability(network)
		if err != nil {
			s.logger.Error("read probe counters", "network", network, "err", err)
		} else if len(paths) > 0 {
			return paths
		}
	}
	withheld := "no probes have run for this network"
	return []PathAvailability{
		{Path: ProbePathRPC, Withheld: withheld},
		{Path: ProbePathSettle, Withheld: withheld},
	}
}

func (s *Service) screeningStatus(now time.Time) ScreeningStatus {
	if s.cfg.Screening == nil {
		return ScreeningStatus{}
	}
	st := s.cfg.Screening.State()
	out := ScreeningStatus{
		Enabled: true, Source: st.Source, Size: st.Size, Ignored: st.Ignored,
		SHA256: st.SHA256, LastError: st.LastError,
	}
	if !st.LoadedAt.IsZero() {
		t := st.LoadedAt.UTC()
		out.LoadedAt = &t
	}
	if !st.FileModTime.IsZero() {
		t := st.FileModTime.UTC()
		out.FileModTime = &t
		age := int64(max(0, now.Sub(t)) / time.Second)
		out.AgeSeconds = &age
	}
	return out
}

// handleStatusJSON handles "GET /status.json".
func (s *Service) handleStatusJSON(w http.ResponseWriter, r *http.Request) {
	// Counts move with every settlement and probe; caches may hold them
	// only briefly.
	w.Header().Set("Cache-Control", "public, max-age=5")
	web.WriteJSON(w, http.StatusOK, s.status())
}

//go:embed templates/status.html templates/integrate.html
var pagesFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"observed": formatObserved,
	"ago":      formatAge,
	"datetime": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"deref":    func(b *bool) bool { return b != nil && *b },
}).ParseFS(pagesFS, "templates/status.html", "templates/integrate.html"))

// handleStatusPage handles "GET /status": the status document as a
// server-rendered page with inline CSS and no external assets.
func (s *Service) handleStatusPage(w http.ResponseWriter, r *http.Request) {
	s.renderPage(w, r, "status.html", s.status())
}

// renderPage renders a page into a buffer first, so a template error is a
// clean 500 problem rather than half a page.
func (s *Service) renderPage(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.problems.Write(w, r, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=5")
	// The pages load nothing from anywhere: say so to the browser.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// formatObserved says what a path's Wilson lower bound means: "at least
// 72% with 95% confidence, 10 of 10 ok". The bound is rounded down, so
// "at least" stays true; above 99% it keeps one decimal (99.9% and 99% are
// different promises).
func formatObserved(p PathAvailability) string {
	counts := fmt.Sprintf("%d of %d ok", p.Successes, p.Probes)
	if p.LowerBound == nil {
		return "withheld, " + counts
	}
	pct := *p.LowerBound * 100
	bound := strconv.FormatFloat(math.Floor(pct), 'f', 0, 64)
	if pct >= 99 {
		bound = strconv.FormatFloat(math.Floor(pct*10)/10, 'f', 1, 64)
	}
	return "at least " + bound + "% with 95% confidence, " + counts
}

// formatAge shows a number of seconds as the largest whole unit.
func formatAge(seconds *int64) string {
	if seconds == nil {
		return "unknown"
	}
	d := time.Duration(*seconds) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", *seconds)
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}
