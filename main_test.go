package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "ardx ") {
		t.Errorf("version printed %q", out.String())
	}
}
