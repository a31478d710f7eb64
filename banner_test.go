package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBannerNamesWhatToOpenAndPayWith(t *testing.T) {
	var buf bytes.Buffer
	printBanner(&buf, "./ardx-data", &startupInfo{
		registryURL: "http://127.0.0.1:8080", facilitatorURL: "http://127.0.0.1:4020",
		dev:         &devAccounts{network: "eip155:1337", payer: "0xPAYER", payerKeyFile: "ardx-data/dev-payer.key", merchant: "0xMERCHANT"},
		echoNetwork: "eip155:1337",
	})
	out := buf.String()
	for _, want := range []string{"http://127.0.0.1:8080/", "http://127.0.0.1:4020/", "./ardx-data", "0xPAYER",
		"ardx-data/dev-payer.key", "0xMERCHANT", "settles on eip155:1337", "/status", "--to 0xMERCHANT"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n > 14 {
		t.Errorf("banner has %d lines, want it short:\n%s", n, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 160 {
			t.Errorf("line of %d characters: %s", len(line), line)
		}
	}

	buf.Reset()
	printBanner(&buf, "d", &startupInfo{facilitatorURL: "http://x", echoNotServing: "no --echo-wallet-key-file for network eip155:8453"})
	if !strings.Contains(buf.String(), "not serving: no --echo-wallet-key-file") {
		t.Errorf("banner hides why /echo is not serving:\n%s", buf.String())
	}
}
