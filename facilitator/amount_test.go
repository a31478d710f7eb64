package facilitator_test

import (
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator"
)

func TestParseAmount(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		decimals uint8
		want     string // "" means an error is expected
	}{
		{"cent of USDC", "0.01", 6, "10000"},
		{"whole units", "2", 6, "2000000"},
		{"all decimals used", "1.000001", 6, "1000001"},
		{"leading dot", ".5", 6, "500000"},
		{"surrounding space", " 0.001 ", 6, "1000"},
		{"zero decimals", "7", 0, "7"},
		{"too many decimals", "0.0000001", 6, ""},
		{"fraction with zero decimals", "1.5", 0, ""},
		{"zero", "0.00", 6, ""},
		{"negative", "-1", 6, ""},
		{"plus sign", "+1", 6, ""},
		{"exponent", "1e6", 6, ""},
		{"trailing dot", "1.", 6, ""},
		{"empty", "", 6, ""},
		{"just a dot", ".", 6, ""},
		{"comma", "0,01", 6, ""},
		{"beyond uint256", strings.Repeat("9", 80), 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := facilitator.ParseAmount(tc.in, tc.decimals)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParseAmount(%q) = %s, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAmount(%q): %v", tc.in, err)
			}
			if got.String() != tc.want {
				t.Fatalf("ParseAmount(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseRateLimits(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantOff bool
		want    map[string][2]float64 // name -> rate, burst
		wantErr bool
	}{
		{name: "defaults", spec: "", want: map[string][2]float64{"settle": {50, 100}, "payments-read": {30, 60}, "discovery": {10, 20}}},
		{name: "off", spec: "off", wantOff: true},
		{name: "override one", spec: "discovery=1:2", want: map[string][2]float64{"settle": {50, 100}, "payments-read": {30, 60}, "discovery": {1, 2}}},
		{name: "override two", spec: "settle=5:10, payments-read=3:6", want: map[string][2]float64{"settle": {5, 10}, "payments-read": {3, 6}, "discovery": {10, 20}}},
		{name: "unknown bucket", spec: "search=1:2", wantErr: true},
		{name: "malformed", spec: "settle=fast", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buckets, off, err := facilitator.ParseRateLimits(tc.spec)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseRateLimits(%q) succeeded, want an error", tc.spec)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRateLimits(%q): %v", tc.spec, err)
			}
			if off != tc.wantOff {
				t.Fatalf("off = %v, want %v", off, tc.wantOff)
			}
			if tc.want == nil {
				return
			}
			if len(buckets) != len(tc.want) {
				t.Fatalf("got %d buckets, want %d", len(buckets), len(tc.want))
			}
			for _, b := range buckets {
				w, ok := tc.want[b.Name]
				if !ok || float64(b.Rate) != w[0] || float64(b.Burst) != w[1] {
					t.Errorf("bucket %s = %v:%v, want %v", b.Name, b.Rate, b.Burst, w)
				}
			}
		})
	}
}
