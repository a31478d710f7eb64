package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRegistryAccessFlags: bad rate-limit and proxy flags stop the start
// with the flag named, before anything listens or opens the data dir.
func TestRegistryAccessFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown bucket", []string{"--registry-rate-limit", "search=1:1"}, nil, "--registry-rate-limit"},
		{"bad spec", []string{"--registry-rate-limit", "address=x:1"}, nil, "--registry-rate-limit"},
		{"bad proxy", []string{"--registry-trusted-proxy", "nope"}, nil, "--registry-trusted-proxy"},
		{"bad limit from the environment", nil, map[string]string{"ARDX_REGISTRY_RATE_LIMIT": "key=1:0"}, "--registry-rate-limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"registry", "--data", t.TempDir(), "--registry-addr", "127.0.0.1:0", "--public-registries", "none", "--endpoint-probe-interval", "0"}, tc.args...)
			err := run(context.Background(), args, envOf(tc.env), nil, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %v = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}
