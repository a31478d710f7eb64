package main

import (
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=..."; without
// it, init takes it from the build info that go build and go install stamp.
var version = "dev"

func init() {
	bi, ok := debug.ReadBuildInfo()
	version = resolveVersion(version, bi, ok)
}

// resolveVersion prefers a version given with -ldflags; then the main
// module's version (a tag from go install module@v1.2.3, or the
// pseudo-version go build derives from the VCS checkout, which already names
// the revision); then the VCS revision alone; then "dev".
func resolveVersion(ldflags string, bi *debug.BuildInfo, ok bool) string {
	if ldflags != "dev" && ldflags != "" {
		return ldflags
	}
	if !ok || bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}
