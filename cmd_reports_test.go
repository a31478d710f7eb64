package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportSourceKeys: the web-search key and the GitHub token come from
// a file or the environment, and a failure names the flag, never a key.
func TestReportSourceKeys(t *testing.T) {
	env := map[string]string{"ARDX_WEB_SEARCH_KEY": " env-key \n", "ARDX_USAGE_GITHUB_TOKEN": "gh-env"}
	getenv := func(k string) string { return env[k] }
	rc := registryConfig{reports: reportFlags{webSearchURL: "https://search.test/res"}}
	rs, err := rc.reportSources(getenv)
	if err != nil || rs.WebSearch.Key != "env-key" || rs.Usage.GitHubToken != "gh-env" || rs.WebSearch.Endpoint != "https://search.test/res" {
		t.Fatalf("from the environment: %+v %v", rs, err)
	}
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc.reports.webSearchKeyFile = file
	if rs, err = rc.reportSources(getenv); err != nil || rs.WebSearch.Key != "file-key" {
		t.Fatalf("from the file: %+v %v", rs.WebSearch, err)
	}
	rc.reports.webSearchKeyFile = file + ".missing"
	_, err = rc.reportSources(getenv)
	if err == nil || !strings.Contains(err.Error(), "--web-search-key-file") || strings.Contains(err.Error(), "env-key") {
		t.Fatalf("missing file: %v", err)
	}
}
