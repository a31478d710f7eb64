package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ardx-dev/ardx/registry/ingest"
)

func (c *cli) crawlCmd() *cobra.Command {
	var asJSON bool
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "crawl DOMAIN...",
		Short: "Discover and ingest everything domains publish: ARD manifest, API descriptions, MCP servers, llms.txt",
		Long: `Crawl finds each domain's ARD manifest as ARD v0.91 says (an Agentmap line in
robots.txt, <link rel="ard"> in the home page, an HTTP Link header with rel="ard",
/.well-known/ard.json, then the deprecated /.well-known/ai-catalog.json with a
warning) and ingests it, together with the API descriptions (OpenAPI 3.x, Swagger
2.0) and MCP servers its entries point at, /llms.txt and the API and MCP links in
it, an API description at /openapi.json, /openapi.yaml, /swagger.json or
/.well-known/openapi.json, and an MCP server card at its well-known path. Every
API operation and MCP tool becomes an entry of its own.

Requests to one host never overlap and are --delay apart; ETag and Last-Modified
are honoured. A domain that cannot be crawled keeps its earlier entries. The
command exits non-zero when any domain failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := c.logger()
			if err != nil {
				return err
			}
			if delay < 0 {
				return fmt.Errorf("--delay must not be negative")
			}
			stores, err := c.openRegistryStores(cmd.Context(), logger, false)
			if err != nil {
				return err
			}
			defer stores.close()
			in := stores.ingester
			in.CrawlDelay = delay
			if delay == 0 {
				in.CrawlDelay = -1 // no pause, as asked
			}
			// One progress line per domain as it finishes (a bar on a terminal).
			in.Progress = c.stderr
			rep, err := in.Crawl(cmd.Context(), args...)
			if rep != nil {
				if asJSON {
					enc := json.NewEncoder(c.stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(rep); err != nil {
						return err
					}
				} else {
					rep.Print(c.stdout)
				}
			}
			if err != nil {
				return err
			}
			if n := len(rep.Errors()); n > 0 {
				return fmt.Errorf("%d of %d domain(s) could not be crawled", n, len(rep.Domains))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the crawl report as JSON")
	cmd.Flags().DurationVar(&delay, "delay", ingest.DefaultCrawlDelay, "pause between two requests to one host")
	return cmd
}

// parseResolve reads --resolve values, DOMAIN=IP:PORT, into the pins of
// web.FetchOptions.Resolve. Only loopback addresses are accepted: the flag
// exists to point a real domain name at a local test server, and pinning a
// name to any other address would be a way around the outbound client's
// address checks.
func parseResolve(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(values))
	for _, v := range values {
		domain, addr, ok := strings.Cut(v, "=")
		domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
		if !ok || domain == "" || strings.ContainsAny(domain, "/: ") {
			return nil, fmt.Errorf("--resolve %q: want DOMAIN=127.0.0.1:PORT", v)
		}
		host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
		if err != nil || port == "" {
			return nil, fmt.Errorf("--resolve %q: want DOMAIN=127.0.0.1:PORT", v)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("--resolve %q: the address must be a loopback IP (127.0.0.1 or ::1)", v)
		}
		out[domain] = net.JoinHostPort(ip.String(), port)
	}
	return out, nil
}
