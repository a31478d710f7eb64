package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummariseListsSkipsAndEchoesFailures(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"ex/a"}`,
		`{"Action":"run","Package":"ex/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"    a_test.go:9: chatter\n"}`,
		`{"Action":"pass","Package":"ex/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestNPM","Output":"=== RUN   TestNPM\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestNPM","Output":"    a_test.go:12: npm not installed\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestNPM","Output":"--- SKIP: TestNPM (0.00s)\n"}`,
		`{"Action":"skip","Package":"ex/a","Test":"TestNPM"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestBad","Output":"    a_test.go:20: got 2, want 3\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"ex/a","Test":"TestBad"}`,
		`{"Action":"output","Package":"ex/a","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"ex/a","Output":"FAIL\tex/a\t0.01s\n"}`,
		`{"Action":"fail","Package":"ex/a"}`,
		`{"Action":"output","Package":"ex/b","Test":"TestQuiet","Output":"--- SKIP: TestQuiet (0.00s)\n"}`,
		`{"Action":"skip","Package":"ex/b","Test":"TestQuiet"}`,
		`{"Action":"output","Package":"ex/b","Output":"PASS\n"}`,
		`{"Action":"output","Package":"ex/b","Output":"ok  \tex/b\t0.01s\n"}`,
		`{"ImportPath":"ex/c","Action":"build-output","Output":"c.go:3:1: syntax error\n"}`,
		`{"ImportPath":"ex/c","Action":"build-fail"}`,
		`{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}`,
		`{"Action":"fail","Package":"ex/c","FailedBuild":"ex/c"}`,
	}, "\n")
	var out bytes.Buffer
	s := summarise(strings.NewReader(stream), &out)
	s.print(&out)
	got := out.String()
	for _, want := range []string{
		"got 2, want 3", "--- FAIL: TestBad", "FAIL\tex/a", "ok  \tex/b", "c.go:3:1: syntax error",
		"skipped tests (2):\n  ex/a.TestNPM: a_test.go:12: npm not installed\n  ex/b.TestQuiet: (no reason given)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"chatter", "=== RUN", "PASS\n"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q, which plain go test does not print:\n%s", not, got)
		}
	}
	if !strings.HasSuffix(got, "\n1 passed, 1 failed, 2 skipped, 1 packages failed outside their tests\n") {
		t.Errorf("last line:\n%s", got)
	}
}
