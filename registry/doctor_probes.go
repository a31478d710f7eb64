package registry

// The doctor's findings from probe history: what happened when this
// registry called the domain's endpoints.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ardx-dev/ardx/probe"
)

// flappingDowns is how many times in the window an endpoint must have gone
// down (after the debounce) to be called flapping.
const flappingDowns = 3

// probeFindings reports, per endpoint of the domain's public entries: never
// reachable, flapping, down now, auth required, tools changed, and how much
// it answered; endpoints not probed yet get one info finding.
func (s *Service) probeFindings(ctx context.Context, domain string) []finding {
	held, err := s.heldByPublisher(ctx, domain)
	if err != nil || len(held) == 0 {
		return nil // indexFindings already said so
	}
	eps := map[string]endpoint{}
	idOf := map[string]string{}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ep, _, ok := endpointOf(held[id])
		if !ok {
			continue
		}
		if _, seen := eps[ep.name()]; !seen {
			eps[ep.name()], idOf[ep.name()] = ep, id
		}
	}
	names := make([]string, 0, len(eps))
	for n := range eps {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []finding
	window := s.cfg.Probe.Window
	for _, name := range names {
		ep, id := eps[name], idOf[name]
		u := firstOf(ep.url, ep.cardURL)
		sum, err := probe.Summarize(s.db, name, window, s.cfg.Now())
		if err != nil {
			s.log.Warn("doctor: probe history", "target", name, "err", err)
			continue
		}
		add := func(sev, code, format string, args ...any) {
			out = append(out, finding{Severity: sev, Code: code, Pointer: "", Identifier: id, URL: u, Message: fmt.Sprintf(format, args...)})
		}
		l := sum.Last
		if l == nil {
			add(sevInfo, "probe.not-probed", "this %s endpoint has not been probed yet", ep.kind)
			continue
		}
		answered := fmt.Sprintf("answered %d of %d probes over %d days", sum.Successes, sum.Probes, window)
		switch {
		case sum.Probes >= probe.MinProbes && sum.Successes == 0:
			add(sevError, "probe.never-reachable", "never answered a probe: %s; the last ended %s (%s)", answered, l.Class, l.Error)
		case l.State == probe.StateDown:
			add(sevError, "probe.down", "down since %s after %d failed probes in a row, the last %s (%s); %s", l.Since.UTC().Format(time.RFC3339), l.Fails, l.Class, l.Error, answered)
		case sum.Downs >= flappingDowns:
			add(sevWarning, "probe.flapping", "went down %d times in %d days (each after the debounce); %s", sum.Downs, window, answered)
		default:
			add(sevInfo, "probe.answered", "%s; last probe %s at %s", answered, l.Class, l.At.UTC().Format(time.RFC3339))
		}
		if l.Class == string(probe.ClassAuthRequired) {
			add(sevInfo, "probe.auth-required", "the endpoint asks for authentication (HTTP 401/403): callers need a key or an OAuth token before they can use it")
		}
		if !l.ToolsChangedAt.IsZero() && l.ToolsChangedAt.After(s.cfg.Now().AddDate(0, 0, -window)) {
			add(sevWarning, "probe.tools-changed", "the tool list (names, descriptions or schemas) changed at %s; clients that pinned the earlier descriptions should review the change (see /feed/changes)", l.ToolsChangedAt.UTC().Format(time.RFC3339))
		}
	}
	return out
}
