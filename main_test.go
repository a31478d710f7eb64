package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestEnvFillsFlagsNotGiven(t *testing.T) {
	var addr string
	var ups []string
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.Flags().StringVar(&addr, "registry-addr", "127.0.0.1:8080", "")
	cmd.Flags().StringArrayVar(&ups, "upstream", nil, "")
	cmd.Flags().StringArray("rpc", nil, "")
	env := envOf(map[string]string{
		"ARDX_REGISTRY_ADDR": "127.0.0.1:9999",
		"ARDX_UPSTREAM":      "http://a.test, http://b.test",
	})
	if err := cmd.ParseFlags([]string{"--rpc", "dev=http://x"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd, env); err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1:9999" {
		t.Errorf("addr = %q", addr)
	}
	if len(ups) != 2 || ups[1] != "http://b.test" {
		t.Errorf("upstreams = %q", ups)
	}

	// A flag on the command line wins over the environment.
	addr = ""
	cmd2 := &cobra.Command{Use: "y"}
	cmd2.Flags().StringVar(&addr, "registry-addr", "d", "")
	cmd2.ParseFlags([]string{"--registry-addr", "cli:1"})
	applyEnv(cmd2, env)
	if addr != "cli:1" {
		t.Errorf("command line lost to env: %q", addr)
	}
}

func TestReadSignerKeysNeverEchoesKeys(t *testing.T) {
	dir := t.TempDir()
	good := "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	bad := "deadbeefnotakeyatallbutsecretish"
	path := filepath.Join(dir, "keys")
	os.WriteFile(path, []byte("# signers\n"+good+"\n\n0x"+good+"\n"), 0o600)
	keys, err := readSignerKeys(path, envOf(nil))
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys=%d err=%v", len(keys), err)
	}
	os.WriteFile(path, []byte(bad+"\n"), 0o600)
	_, err = readSignerKeys(path, envOf(nil))
	if err == nil || strings.Contains(err.Error(), bad) {
		t.Fatalf("bad key error %v", err)
	}
	keys, err = readSignerKeys("", envOf(map[string]string{"ARDX_SIGNER_KEYS": good + "," + good}))
	if err != nil || len(keys) != 2 {
		t.Fatalf("from env: keys=%d err=%v", len(keys), err)
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, envOf(nil), nil, &out, &out); err != nil {
			t.Fatal(err)
		}
		if want := "ardx " + version + "\n"; out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}
}

func TestResolveVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "c1aa44884c5b87455c367d06fb2fb1d246e003f9"
	tests := []struct {
		name    string
		ldflags string
		bi      *debug.BuildInfo
		want    string
	}{
		{"ldflags win", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3"},
		{"go install module@tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"go build in a checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125000237-c1aa44884c5b+dirty"}, Settings: vcs(rev, "true")},
			"v0.0.0-20261125000237-c1aa44884c5b+dirty"},
		{"revision without a module version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "dev-c1aa44884c5b-dirty"},
		{"clean revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "dev-c1aa44884c5b"},
		{"nothing known", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "dev", nil, "dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveVersion(tc.ldflags, tc.bi, tc.bi != nil); got != tc.want {
				t.Errorf("resolveVersion = %q, want %q", got, tc.want)
			}
		})
	}
}
