// Command loadgen measures search through the real ardx binary over HTTP,
// from a separate process: it writes a registry of N entries built from the
// toolsdk package list, ingests it with `ardx ingest`, starts `ardx
// registry` on loopback, and sends MetaTool's natural-language queries to
// POST /search (federation none), each text once in the whole run, so no
// cache answers any of them. It runs one client, then several, and prints
// each run as a Go benchmark line (p50, p99, searches/s, the CPU each
// process spent a search, and the p50 and p99 of the server's own handler
// time, read from its request log), so `make bench` output reads as one
// report.
//
//	go run ./internal/loadgen -bin ./ardx
//
// With -against, a second binary is measured at the same time as -bin,
// each with its own copy of the data dir and the same queries from the
// same number of clients: on a shared machine, runs one after the other
// measure the neighbours as much as the change, and two builds run side by
// side meet the same load. Each run then prints a line per binary and the
// second's server CPU per search over the first's.
//
// The data comes from ../shared/data (or $ARDX_SHARED_DATA); where it is
// absent the command says so and exits 0, as a skipped benchmark does.
package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ardx-dev/ardx/internal/procstat"
	"github.com/ardx-dev/ardx/internal/shareddata"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type config struct {
	bin      string
	entries  int
	clients  []int
	perRun   int
	warm     int
	dataDir  string
	keepData bool
	profile  string
	against  string
}

func run() error {
	var c config
	var clients string
	flag.StringVar(&c.bin, "bin", "./ardx", "the ardx binary to measure")
	flag.IntVar(&c.entries, "entries", 100_000, "registry entries")
	flag.StringVar(&clients, "clients", "1,8", "concurrent clients per run, comma-separated")
	flag.IntVar(&c.perRun, "queries", 0, "queries per run (0: share the unique queries out evenly after the warm-up)")
	flag.IntVar(&c.warm, "warm", 500, "unmeasured queries first (their texts are not used again)")
	flag.StringVar(&c.dataDir, "data", "", "data dir to reuse (kept); default a fresh temporary one, removed after")
	flag.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the server's first 10 s of the last run to this file (go tool pprof)")
	flag.StringVar(&c.against, "against", "", "a second ardx binary, measured at the same time as -bin on a copy of the data dir")
	flag.Parse()
	if c.against != "" && c.profile != "" {
		return errors.New("-cpuprofile profiles one server: not with -against")
	}
	for _, s := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-clients %q: want positive integers", clients)
		}
		c.clients = append(c.clients, n)
	}
	shared, err := sharedData()
	if err != nil {
		fmt.Printf("loadgen: skipped: %v\n", err)
		return nil
	}
	queries, err := metaToolQueries(filepath.Join(shared, "metatool", "all_clean_data.csv"))
	if err != nil {
		return err
	}
	need := c.warm + len(c.clients)*max(c.perRun, 1)
	if len(queries) < need {
		return fmt.Errorf("%d unique queries, the runs need %d", len(queries), need)
	}
	if c.perRun == 0 {
		c.perRun = (len(queries) - c.warm) / len(c.clients)
	}
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("-bin: %w (make build first)", err)
	}
	var against string
	if c.against != "" {
		if against, err = filepath.Abs(c.against); err != nil {
			return err
		}
		if _, err := os.Stat(against); err != nil {
			return fmt.Errorf("-against: %w", err)
		}
	}

	data := c.dataDir
	if data == "" {
		tmp, err := os.MkdirTemp("", "ardx-loadgen-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		data = tmp
	}
	if _, err := os.Stat(filepath.Join(data, "ardx.db")); err != nil {
		start := time.Now()
		if err := ingestCorpus(bin, data, filepath.Join(shared, "toolsdk", "packages-list.json"), c.entries); err != nil {
			return err
		}
		fmt.Printf("loadgen: ingested %d entries in %v\n", c.entries, time.Since(start).Round(time.Millisecond))
	}

	bins := []string{bin}
	datas := []string{data}
	if against != "" {
		copied, err := os.MkdirTemp("", "ardx-loadgen-against-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(copied)
		if err := copyDir(data, copied); err != nil {
			return fmt.Errorf("copy the data dir for -against: %w", err)
		}
		bins, datas = append(bins, against), append(datas, copied)
	}
	srvs := make([]*server, len(bins))
	for i := range bins {
		srv, err := startRegistry(bins[i], datas[i], c.profile != "")
		if err != nil {
			return err
		}
		defer srv.stop()
		srvs[i] = srv
		fmt.Printf("loadgen: ardx registry %s pid %d at %s\n", bins[i], srv.cmd.Process.Pid, srv.url)
		if _, err := drive(srv.url, queries[:c.warm], 2); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	next := queries[c.warm:]
	for _, n := range c.clients {
		qs := next[:c.perRun]
		next = next[c.perRun:]
		var prof *profiler
		if c.profile != "" && n == c.clients[len(c.clients)-1] {
			prof = startProfile(srvs[0].pprof, c.profile)
		}
		marks := make([]int64, len(srvs))
		for i, srv := range srvs {
			marks[i] = srv.logSize()
		}
		runs, err := driveAll(srvs, qs, n)
		if err != nil {
			return fmt.Errorf("%d clients: %w", n, err)
		}
		for i, srv := range srvs {
			if runs[i].handler, err = srv.handlerTimes(marks[i], len(qs)); err != nil {
				return fmt.Errorf("%d clients: the server's log: %w", n, err)
			}
		}
		if prof != nil {
			if err := prof.stop(); err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
			fmt.Printf("loadgen: server CPU profile of the %d-client run in %s\n", n, c.profile)
		}
		name := fmt.Sprintf("BenchmarkSearchLoadgen/entries=%d/clients=%d", c.entries, n)
		for i, r := range runs {
			label := name
			if len(runs) > 1 {
				label += "/bin=" + "ab"[i:i+1]
			}
			fmt.Printf("%s\t%8d\t%10.0f ns/op\t%8.3f p50-ms\t%8.3f p99-ms\t%8.0f searches/s\t%8.1f server-cpu-µs/op\t%8.1f loadgen-cpu-µs/op\t%8.2f handler-p50-ms\t%8.2f handler-p99-ms\n",
				label, len(qs), float64(r.wall.Nanoseconds())/float64(len(qs)), ms(r.p50), ms(r.p99), float64(len(qs))/r.wall.Seconds(),
				perSearch(r.server, len(qs)), perSearch(r.own, len(qs)*len(runs)), r.handler.p50, r.handler.p99)
		}
		if len(runs) == 2 {
			fmt.Printf("loadgen: %d clients: b's server CPU a search is %.3f× a's (a %s, b %s)\n", n, float64(runs[1].server)/float64(runs[0].server), bins[0], bins[1])
		}
	}
	return nil
}

// measured is one server's run: its timings, the server's CPU time and
// the generator's (shared by every server measured at once).
type measured struct {
	result
	server, own time.Duration
	handler     handlerTimes
}

// handlerTimes is the server's own time for a run's searches, as its
// request log states it (handler entry to return, in milliseconds to two
// decimals): against the client's latency it tells the search's cost from
// the waiting around it (the network stack, the scheduler, the host).
type handlerTimes struct{ p50, p99 float64 }

// logSize is how many bytes the server has logged so far.
func (s *server) logSize() int64 {
	fi, err := os.Stat(s.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// handlerTimes reads the times of the searches the server logged past
// byte from, waiting up to 2 s for the last of n lines: the server writes
// a request's line after it has sent the answer.
func (s *server) handlerTimes(from int64, n int) (handlerTimes, error) {
	deadline := time.Now().Add(2 * time.Second)
	var times []float64
	for {
		var err error
		from, err = s.logLines(from, func(line []byte) {
			if ms, ok := searchTime(line); ok {
				times = append(times, ms)
			}
		})
		if err != nil {
			return handlerTimes{}, err
		}
		if len(times) >= n || time.Now().After(deadline) {
			if len(times) == 0 {
				return handlerTimes{}, errors.New("no search logged")
			}
			slices.Sort(times)
			return handlerTimes{p50: times[len(times)/2], p99: times[len(times)*99/100]}, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// searchTime is the "ms" of a POST /search request line of the server's
// log; ok is false for any other line.
func searchTime(line []byte) (ms float64, ok bool) {
	if !bytes.Contains(line, []byte(`"/search"`)) {
		return 0, false
	}
	var rec struct {
		Msg, Method, Path string
		Ms                float64
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "request" || rec.Method != http.MethodPost || rec.Path != "/search" {
		return 0, false
	}
	return rec.Ms, true
}

// logLines calls fn with each whole line the server has logged past byte
// from and returns the offset past the last of them; a line still being
// written is left for the next call.
func (s *server) logLines(from int64, fn func(line []byte)) (int64, error) {
	f, err := os.Open(s.log)
	if err != nil {
		return from, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return from, err
	}
	rd := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := rd.ReadBytes('\n')
		if err == io.EOF {
			return from, nil
		}
		if err != nil {
			return from, err
		}
		from += int64(len(line))
		fn(line[:len(line)-1])
	}
}

// driveAll sends qs to every server at once, n clients each, and measures
// each. The server's CPU time per search: on a shared machine wall time
// mostly measures the neighbours, CPU time what ardx costs. The
// generator's own CPU is reported too: it shares the machine, so what it
// spends the server cannot.
func driveAll(srvs []*server, qs []string, n int) ([]measured, error) {
	out := make([]measured, len(srvs))
	errs := make([]error, len(srvs))
	cpu0 := make([]time.Duration, len(srvs))
	for i, srv := range srvs {
		cpu0[i] = procstat.CPUTimeOf(srv.cmd.Process.Pid)
	}
	own0 := procstat.CPUTime()
	var wg sync.WaitGroup
	for i, srv := range srvs {
		wg.Go(func() {
			out[i].result, errs[i] = drive(srv.url, qs, n)
			out[i].server = procstat.CPUTimeOf(srv.cmd.Process.Pid) - cpu0[i]
		})
	}
	wg.Wait()
	own := procstat.CPUTime() - own0
	for i := range out {
		out[i].own = own
	}
	return out, errors.Join(errs...)
}

func perSearch(d time.Duration, searches int) float64 {
	return float64(d.Microseconds()) / float64(searches)
}

// copyDir copies the regular files and directories under src into dst,
// which exists: a stopped server's data dir, for a second server.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", path)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sharedData finds the shared data folder (shareddata.Locate) and checks
// that it holds both data sets.
func sharedData() (string, error) {
	dir := shareddata.Locate()
	for _, f := range []string{"metatool/all_clean_data.csv", "toolsdk/packages-list.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("shared data not available (set ARDX_SHARED_DATA): %w", err)
		}
	}
	return dir, nil
}

// maxQueryText is the longest query text POST /search accepts (bytes).
const maxQueryText = 1024

// metaToolQueries returns MetaTool's query texts, each once, in file
// order, leaving out the few longer than POST /search accepts.
func metaToolQueries(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range rows[min(1, len(rows)):] { // header
		t := strings.TrimSpace(r[0])
		if t == "" || len(t) > maxQueryText || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out, nil
}

// ingestCorpus writes n entries of the search benchmarks' corpus
// (shareddata.Corpus, built from the toolsdk package list) as ARD manifests
// of 5,000 entries and ingests them with `ardx ingest`.
func ingestCorpus(bin, data, toolsdk string, n int) error {
	pkgs, err := shareddata.ReadToolsdk(toolsdk)
	if err != nil {
		return err
	}
	corpus := shareddata.NewCorpus(pkgs)
	src, err := os.MkdirTemp("", "ardx-loadgen-src-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	const perFile = 5000
	entries := make([]map[string]any, 0, perFile)
	files := 0
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		b, err := json.Marshal(map[string]any{"entries": entries})
		if err != nil {
			return err
		}
		files++
		entries = entries[:0]
		return os.WriteFile(filepath.Join(src, fmt.Sprintf("part-%03d.json", files)), b, 0o644)
	}
	for i := range n {
		_, entry := corpus.Entry(i)
		entries = append(entries, entry)
		if len(entries) == perFile {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	cmd := exec.Command(bin, "ingest", "--data", data, src)
	cmd.Env = testEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ardx ingest: %w\n%s", err, tail(out, 2000))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// testEnv is the environment of every ardx process loadgen starts: no
// built-in public registry is asked and no endpoint is probed, so the
// measure is search alone and nothing leaves loopback.
func testEnv() []string {
	return append(os.Environ(), "ARDX_PUBLIC_REGISTRIES=none", "ARDX_ENDPOINT_PROBE_INTERVAL=0", "ARDX_BENCH_INTERVAL=0", "ARDX_LOG_LEVEL=warn")
}

type server struct {
	cmd   *exec.Cmd
	url   string
	pprof chan string // the metrics listener's profiler, when asked for
	log   string      // the file the server logs to
	done  chan struct{}
}

// startRegistry starts `ardx registry` on an ephemeral loopback port and
// waits for its "listening" log line; with profiling, its metrics listener
// (which serves Go's profiler) gets a port of its own too. The server logs
// every request: it logs to a file, as a deployed one does, so that
// reading its log costs the generator (on the same cores) nothing a
// search; a pipe cost the generator a read and a wake-up for every few
// lines.
func startRegistry(bin, data string, profiling bool) (*server, error) {
	s := &server{done: make(chan struct{}), pprof: make(chan string, 1)}
	args := []string{"registry", "--data", data, "--registry-addr", "127.0.0.1:0",
		"--no-default-corpus", "--log-format", "json",
		// One address sends every query: the per-address limit would
		// measure itself, not the search.
		"--registry-rate-limit", "off"}
	if profiling {
		args = append(args, "--metrics-addr", "127.0.0.1:0")
	}
	s.cmd = exec.Command(bin, args...)
	env := testEnv()
	env[len(env)-1] = "ARDX_LOG_LEVEL=info" // the listening line is at info; requests are too
	s.cmd.Env = env
	logf, err := os.CreateTemp("", "ardx-loadgen-registry-*.log")
	if err != nil {
		return nil, err
	}
	s.log = logf.Name()
	s.cmd.Stderr = logf
	err = s.cmd.Start()
	logf.Close() // the server has its own descriptor
	if err != nil {
		os.Remove(s.log)
		return nil, fmt.Errorf("start ardx registry: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.awaitListening(profiling); err != nil {
		s.stop()
		return nil, err
	}
	return s, s.ready()
}

// awaitListening reads the server's log as it grows until it names the
// registry's URL and, with profiling, the metrics listener's.
func (s *server) awaitListening(profiling bool) error {
	deadline := time.After(120 * time.Second)
	var read int64 // bytes of the log read, whole lines
	metrics := !profiling
	for {
		var err error
		read, err = s.logLines(read, func(line []byte) {
			var rec struct{ Msg, Service, URL string }
			if !bytes.Contains(line, []byte(`"listening"`)) || json.Unmarshal(line, &rec) != nil || rec.Msg != "listening" {
				return
			}
			switch {
			case rec.Service == "metrics" && !metrics:
				s.pprof <- rec.URL + "/debug/pprof/profile"
				metrics = true
			case rec.Service == "registry" && s.url == "":
				s.url = rec.URL
			}
		})
		if err != nil {
			return err
		}
		if s.url != "" && metrics {
			return nil
		}
		select {
		case <-s.done:
			logged, _ := os.ReadFile(s.log)
			return fmt.Errorf("ardx registry exited before listening:\n%s", tail(logged, 2000))
		case <-deadline:
			return errors.New("ardx registry did not report listening within 120 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ready waits until a search answers 200, the index being open and its
// score calibration settled.
func (s *server) ready() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Post(s.url+"/search", "application/json", strings.NewReader(`{"query":{"text":"weather"},"federation":"none"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no search answered within 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the server by its PID (SIGTERM, then SIGKILL after 10 s).
func (s *server) stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if s.log != "" {
		os.Remove(s.log)
	}
}

type result struct {
	wall     time.Duration
	p50, p99 time.Duration
}

// drive sends every query once, from n clients taking the next query as
// they finish the last, and measures each request from send to the last
// byte of the answer. Each client keeps one HTTP/1.1 connection.
func drive(base string, queries []string, n int) (result, error) {
	u, err := url.Parse(base)
	if err != nil {
		return result{}, err
	}
	// Requests are encoded whole, headers and all, before the clock
	// starts: the generator's own CPU comes out of the two cores the
	// server is measured on.
	reqs := make([][]byte, len(queries))
	for i, q := range queries {
		b, err := json.Marshal(map[string]any{"query": map[string]any{"text": q}, "federation": "none", "pageSize": 10})
		if err != nil {
			return result{}, err
		}
		reqs[i] = append(fmt.Appendf(nil, "POST /search HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, len(b)), b...)
	}
	lat := make([]time.Duration, len(queries))
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &conn{addr: u.Host}
			defer c.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(queries) || failed.Load() {
					return
				}
				t0 := time.Now()
				err := c.post(reqs[i])
				lat[i] = time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("query %q: %w", queries[i], err) })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	slices.Sort(lat)
	return result{wall: wall, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// conn is one client's HTTP/1.1 connection. The generator shares the
// machine with the server, so it writes each request in one system call
// from bytes encoded ahead and reads the answer with net/http's own parser
// on the same goroutine, rather than going through http.Transport, whose
// connection goroutines and hand-offs cost more CPU than the exchange
// itself (measured: 150-220 against 90-135 µs a search).
type conn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
}

// requestTimeout bounds one request, from its write to its last byte.
const requestTimeout = 10 * time.Second

// post sends one encoded request and reads the whole answer, which must be
// 200; a connection the server closes is dialled again for the next.
func (c *conn) post(req []byte) error {
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", c.addr, requestTimeout)
		if err != nil {
			return err
		}
		c.c, c.r = nc, bufio.NewReaderSize(nc, 64<<10)
	}
	if err := c.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return err
	}
	if _, err := c.c.Write(req); err != nil {
		c.close()
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c, c.r = nil, nil
	}
}

// profileSeconds is the length of the server CPU profile taken from the
// start of the last run; a run shorter than that profiles idle time too.
const profileSeconds = 10

// profiler fetches a CPU profile of the server while a run goes on.
type profiler struct{ done chan error }

// startProfile asks the server's profiler for profileSeconds of CPU
// profile, written to file; stop waits for it.
func startProfile(urls <-chan string, file string) *profiler {
	p := &profiler{done: make(chan error, 1)}
	var url string
	select {
	case url = <-urls:
	case <-time.After(5 * time.Second):
		p.done <- errors.New("the server reported no metrics listener")
		return p
	}
	go func() {
		p.done <- fetchProfile(fmt.Sprintf("%s?seconds=%d", url, profileSeconds), file)
	}()
	return p
}

func fetchProfile(url, file string) error {
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (p *profiler) stop() error { return <-p.done }
