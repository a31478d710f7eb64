package registry

import "context"

// probeTrafficKey marks a request context as traffic the registry made
// itself. It is a context value, never a header: only code in this process
// (the benchmark runner, web-position checks) can set it.
type probeTrafficKey struct{}

// WithProbeTraffic returns ctx marked as the registry's own traffic; a
// search answered under it is recorded in the demand log with Probe set,
// and demand reports leave it out unless include_probe asks for it.
func WithProbeTraffic(ctx context.Context) context.Context {
	return context.WithValue(ctx, probeTrafficKey{}, true)
}

// IsProbeTraffic reports whether ctx was marked by WithProbeTraffic.
func IsProbeTraffic(ctx context.Context) bool {
	v, _ := ctx.Value(probeTrafficKey{}).(bool)
	return v
}
