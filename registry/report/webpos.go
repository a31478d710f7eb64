package report

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// kindWeb keys the web positions: w domain 0 day phrase → JSON.
const kindWeb = 'w'

// WebSearchConfig is the operator's web-search provider. The provider is
// called as GET <Endpoint>?q=<phrase>&count=<depth> with the key in the
// X-Subscription-Token header, and answers {"web":{"results":[{"url":…}]}}
// (the Brave Search API's shape; a proxy can adapt another provider). An
// empty Endpoint configures none: nothing is called.
type WebSearchConfig struct {
	Endpoint string
	Key      string
	Client   *http.Client
	// PerSecond and Burst bound the calls (defaults 1 and 5); a report
	// shows the phrasings past the bound as not checked today.
	PerSecond float64
	Burst     int
}

// WebDepth is how many web results a check reads.
const WebDepth = 20

// maxPhrasings bounds the phrasings tracked per domain.
const maxPhrasings = 10

// WebCheck is one phrasing checked on one day.
type WebCheck struct {
	Phrase string `json:"phrase"`
	Date   string `json:"date"`
	// Position is the 1-based rank of the first result on the domain or a
	// subdomain; null with Checked true means not in the first WebDepth.
	Position  *int      `json:"position"`
	Checked   bool      `json:"checked"`
	Reason    string    `json:"reason,omitempty"` // why not checked
	At        time.Time `json:"at,omitzero"`
	Provider  string    `json:"provider,omitempty"`
	FromCache bool      `json:"cached,omitempty"`
}

// WebPositions checks phrasings with the configured provider.
type WebPositions struct {
	db  *kv.DB
	now func() time.Time
	src *source // nil: no provider configured
	mu  sync.Mutex
}

// NewWebPositions returns a checker; with no endpoint it checks nothing.
func NewWebPositions(db *kv.DB, cfg WebSearchConfig, now func() time.Time) *WebPositions {
	w := &WebPositions{db: db, now: now}
	if cfg.Endpoint == "" {
		return w
	}
	if cfg.Client == nil {
		cfg.Client = NewSourceClient()
	}
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = 1
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 5
	}
	w.src = newSource("web-search", cfg.Endpoint, cfg.Client, cfg.PerSecond, cfg.Burst)
	if cfg.Key != "" {
		w.src.header.Set("X-Subscription-Token", cfg.Key)
	}
	return w
}

// Configured reports whether a provider is configured.
func (w *WebPositions) Configured() bool { return w.src != nil }

// Provider is the provider's host, shown with each figure.
func (w *WebPositions) Provider() string {
	if w.src == nil {
		return ""
	}
	u, _ := url.Parse(w.src.base)
	if u == nil {
		return ""
	}
	return u.Host
}

func webKey(domain string, day Day, phrase string) []byte {
	k := append([]byte{kindWeb}, domain...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint32(k, uint32(day))
	return append(k, phrase...)
}

// Check returns today's position of domain for each phrase: recorded
// earlier today, or checked now. Failed checks are not recorded, so the
// next report tries again.
func (w *WebPositions) Check(ctx context.Context, domain string, phrases []string) ([]WebCheck, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	today := DayOf(w.now())
	out := make([]WebCheck, 0, len(phrases))
	for _, p := range phrases[:min(len(phrases), maxPhrasings)] {
		var rec *WebCheck
		if err := w.db.ViewReports(func(rb kv.Reports) error {
			if raw := rb.Get(webKey(domain, today, p)); raw != nil {
				var c WebCheck
				if json.Unmarshal(raw, &c) == nil {
					rec = &c
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if rec != nil {
			rec.FromCache = true
			out = append(out, *rec)
			continue
		}
		c := w.check(ctx, domain, p, today)
		if c.Checked {
			val, _ := json.Marshal(c)
			if err := w.db.UpdateReports(func(rb kv.Reports) error { return rb.Put(webKey(domain, today, p), val) }); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (w *WebPositions) check(ctx context.Context, domain, phrase string, day Day) WebCheck {
	c := WebCheck{Phrase: phrase, Date: day.String()}
	if w.src == nil {
		c.Reason = "no web-search provider is configured on this registry"
		return c
	}
	_, body, err := w.src.get(ctx, "?q="+url.QueryEscape(phrase)+"&count="+strconv.Itoa(WebDepth))
	if err == nil {
		c.Position, err = parsePosition(body, domain)
	}
	if err != nil {
		c.Reason = err.Error()
		return c
	}
	c.Checked, c.At, c.Provider = true, w.now().UTC(), w.Provider()
	return c
}

// parsePosition reads a provider's answer: the 1-based rank of the first
// of the first WebDepth results on domain or a subdomain, nil when none is.
// A result whose url is not a string makes the answer unexpected.
func parsePosition(body []byte, domain string) (*int, error) {
	var v struct {
		Web struct {
			Results []struct {
				URL json.RawMessage `json:"url"`
			} `json:"results"`
		} `json:"web"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil, errUnexpected
	}
	for i, r := range v.Web.Results {
		if i == WebDepth {
			break
		}
		var s string
		if json.Unmarshal(r.URL, &s) != nil {
			return nil, errUnexpected
		}
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if host == domain || strings.HasSuffix(host, "."+domain) {
			pos := i + 1
			return &pos, nil
		}
	}
	return nil, nil
}

// History returns the recorded checks of domain in the window, by day.
func (w *WebPositions) History(domain string, win Window) ([]WebCheck, error) {
	var out []WebCheck
	prefix := append(append([]byte{kindWeb}, domain...), 0)
	start := binary.BigEndian.AppendUint32(append([]byte{}, prefix...), uint32(win.From))
	err := w.db.ViewReports(func(rb kv.Reports) error {
		return rb.Scan(prefix, start, func(k, v []byte) (bool, error) {
			if len(k) < len(prefix)+4 {
				return true, nil
			}
			if Day(binary.BigEndian.Uint32(k[len(prefix):])) > win.To {
				return false, nil
			}
			var c WebCheck
			if err := json.Unmarshal(v, &c); err != nil {
				return false, err
			}
			out = append(out, c)
			return true, nil
		})
	})
	return out, err
}
