package screen

import (
	"strings"
	"testing"
)

// FuzzParse feeds list files as they could arrive from a download: parse
// must not panic, and every address it lists must be found by Listed in
// any letter case.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`["0x8589427373D6D84E98730D7795D8f6f8731FDA16","bc1q"]`))
	f.Add([]byte("# c\n0x722122dF12D4e14e13Ac3b6895a86e84145b6967 note\r\n\n"))
	f.Add([]byte("\xef\xbb\xbf[\"0x\"]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, ignored, err := parse(data)
		if err != nil {
			return
		}
		if ignored < 0 {
			t.Fatal("negative ignored count")
		}
		l := &List{}
		l.snap.Store(&snapshot{set: set})
		for k := range set {
			hexAddr := "0x" + strings.ToUpper(hexString(k[:]))
			if !l.Listed(hexAddr) || !l.Listed(strings.ToLower(hexAddr)) {
				t.Fatalf("listed %x not found", k)
			}
		}
	})
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

func BenchmarkListed(b *testing.B) {
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = "0x" + strings.Repeat("0", 36) + hexString([]byte{byte(i >> 8), byte(i)})
	}
	l := FromAddresses("bench", addrs...)
	probe := "0x8589427373D6D84E98730D7795D8f6f8731FDA16"
	b.ReportAllocs()
	for b.Loop() {
		if l.Listed(probe) {
			b.Fatal("listed")
		}
	}
}
