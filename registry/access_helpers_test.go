package registry_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// fakeDNS is a loopback DNS server answering TXT questions from a table,
// so claims are verified through a real resolver exchange.
type fakeDNS struct {
	conn net.PacketConn
	mu   sync.Mutex
	txt  map[string][]string // lower-case name without the final dot
}

func startDNS(tb testing.TB) *fakeDNS {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	d := &fakeDNS{conn: pc, txt: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := d.answer(buf[:n]); out != nil {
				_, _ = pc.WriteTo(out, addr)
			}
		}
	}()
	tb.Cleanup(func() { pc.Close(); <-done })
	return d
}

func (d *fakeDNS) addr() string { return d.conn.LocalAddr().String() }

func (d *fakeDNS) set(name string, values ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.txt[strings.ToLower(name)] = values
}

func (d *fakeDNS) answer(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	d.mu.Lock()
	values, ok := d.txt[name]
	d.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if ok && q.Type == dnsmessage.TypeTXT {
		for _, v := range values {
			_ = b.TXTResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.TXTResource{TXT: []string{v}})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// fakeSites serves /.well-known/ardx-challenge.txt per Host from a table.
type fakeSites struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string]string // host -> body
}

func startSites(tb testing.TB) *fakeSites {
	tb.Helper()
	s := &fakeSites{files: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		s.mu.Lock()
		body, ok := s.files[strings.ToLower(host)]
		s.mu.Unlock()
		if r.URL.Path != access.ChallengeFilePath || !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *fakeSites) set(host, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[host] = body
}

// claimEnv is a registry whose claims are proved against the fake DNS and
// web servers for the given domains.
type claimEnv struct {
	*fixture
	dns   *fakeDNS
	sites *fakeSites
}

func newClaimEnv(tb testing.TB, cfg registry.Config, domains ...string) *claimEnv {
	tb.Helper()
	dns, sites := startDNS(tb), startSites(tb)
	resolve := map[string]string{}
	for _, d := range domains {
		resolve[d] = sites.srv.Listener.Addr().String()
	}
	cfg.Claims.Resolver = dns.addr()
	cfg.Claims.Fetcher = web.NewFetcher(web.FetchOptions{Resolve: resolve})
	return &claimEnv{fixture: newTestServer(tb, cfg, nil), dns: dns, sites: sites}
}

// call sends a request with an optional key and decodes a JSON answer.
func (f *fixture) call(tb testing.TB, key, method, path, body string) (int, map[string]any, http.Header) {
	tb.Helper()
	status, hdr, raw := f.send(tb, method, path, key, body, nil)
	var out map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &out) != nil && method != http.MethodHead {
		tb.Fatalf("%s %s: not a JSON object: %s", method, path, raw)
	}
	return status, out, hdr
}

// claim runs the whole claim of domain (by DNS or by the file) and returns
// the key used (minted when key is "").
func (e *claimEnv) claim(tb testing.TB, key, domain, method string) string {
	tb.Helper()
	st, out, _ := e.call(tb, key, http.MethodPost, "/claim", `{"domain":"`+domain+`"}`)
	if st != http.StatusOK {
		tb.Fatalf("POST /claim %s: %d %v", domain, st, out)
	}
	if key == "" {
		key = out["key"].(map[string]any)["key"].(string)
	}
	tok := out["token"].(string)
	switch method {
	case access.MethodDNS:
		e.dns.set(out["dns"].(map[string]any)["name"].(string), out["dns"].(map[string]any)["value"].(string))
	default:
		e.sites.set(domain, "some other line\n"+tok+"\n")
	}
	st, out, _ = e.call(tb, key, http.MethodPost, "/claim/verify", `{"domain":"`+domain+`","method":"`+method+`"}`)
	if st != http.StatusOK || out["verified"] != true {
		tb.Fatalf("POST /claim/verify %s by %s: %d %v", domain, method, st, out)
	}
	return key
}

// ardEntry is an ARD entry body for domain named name.
func ardEntry(domain, name, words string) string {
	return `{"identifier":"urn:air:` + domain + `:` + name + `","type":"application/mcp-server-card+json","displayName":"` + name + `","description":"` + words + `","url":"https://` + domain + `/mcp/` + name + `"}`
}
