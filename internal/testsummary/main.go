// Command testsummary runs `go test -json` with the arguments it is given,
// prints what a plain `go test` would (each package's ok/FAIL line, the
// output of failed tests, build errors), then lists every skipped test with
// its reason and ends with one "N passed, N failed, N skipped" line, so a
// skip is never silent. It exits with go test's exit code.
//
// Usage (as `make test` does): go run ./internal/testsummary -count=1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	cmd := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	s := summarise(out, os.Stdout)
	err = cmd.Wait()
	s.print(os.Stdout)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	case s.failed+s.brokenPackages > 0:
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output events
	Test       string
	Output     string
}

// skip is a skipped test and the lines it logged, its reason.
type skip struct {
	name   string
	reason string
}

type summary struct {
	passed, failed int
	skips          []skip
	brokenPackages int // failed with no failed test
}

// summarise reads the event stream, echoing to w what plain go test
// prints, and counts the outcomes of tests (not of packages).
func summarise(r io.Reader, w io.Writer) *summary {
	s := &summary{}
	logs := map[string][]string{}    // package + test → output lines so far
	failedTests := map[string]bool{} // packages with a failed test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not an event: pass it on
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Test == "" && e.Action == "output":
			// Package-level lines: "ok pkg 1.2s", "FAIL", a panic, a
			// TestMain's own prints. The verbose "PASS" line a plain run
			// does not show is dropped.
			if t := strings.TrimSpace(e.Output); t != "PASS" && t != "testing: warning: no tests to run" {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") {
				logs[key] = append(logs[key], e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			if !failedTests[e.Package] {
				s.brokenPackages++ // a build error, a panic outside tests, a TestMain exit
			}
		case e.Test == "":
		case e.Action == "pass":
			s.passed++
			delete(logs, key)
		case e.Action == "fail":
			s.failed++
			failedTests[e.Package] = true
			for _, l := range logs[key] {
				fmt.Fprint(w, l)
			}
			delete(logs, key)
		case e.Action == "skip":
			s.skips = append(s.skips, skip{name: e.Package + "." + e.Test, reason: reasonOf(logs[key])})
			delete(logs, key)
		}
	}
	return s
}

// reasonOf joins the lines a skipped test logged, without the "--- SKIP"
// line and indentation.
func reasonOf(lines []string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return "(no reason given)"
	}
	return strings.Join(out, " / ")
}

func (s *summary) print(w io.Writer) {
	if len(s.skips) > 0 {
		sort.Slice(s.skips, func(i, j int) bool { return s.skips[i].name < s.skips[j].name })
		fmt.Fprintf(w, "\nskipped tests (%d):\n", len(s.skips))
		for _, k := range s.skips {
			fmt.Fprintf(w, "  %s: %s\n", k.name, k.reason)
		}
	}
	broken := ""
	if s.brokenPackages > 0 {
		broken = fmt.Sprintf(", %d packages failed outside their tests", s.brokenPackages)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped%s\n", s.passed, s.failed, len(s.skips), broken)
}
