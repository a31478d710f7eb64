package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/bench"
)

func (c *cli) benchCmd() *cobra.Command {
	var (
		asJSON           bool
		publicURL        string
		upstreams        []string
		publicRegistries []string
		queryTimeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the frozen search benchmark now against this registry's index and its upstreams",
		Long: `Bench asks every query of the frozen task set (GET /bench/tasks.json) of this
data dir's index and of each upstream registry (with federation none, so each
answers from its own index), and reports recall@1/5/10, MRR, nDCG@10 and latency
percentiles. The report is stored in the data dir: the server's /bench and
/bench.json show it. Its searches are recorded as probe traffic in the demand log.
A running server runs the benchmark itself every --bench-interval; this command
needs the data dir, so stop the server first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := c.logger()
			if err != nil {
				return err
			}
			rc := registryConfig{publicRegistries: publicRegistries}
			for _, u := range append(slices.Clone(upstreams), rc.publicRegistryList()...) {
				if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
					return fmt.Errorf("--upstream and --public-registries: %q must be an http(s) base URL", u)
				}
			}
			if queryTimeout <= 0 {
				return fmt.Errorf("--query-timeout must be positive")
			}
			stores, err := c.openRegistryStores(cmd.Context(), logger, false)
			if errors.Is(err, kv.ErrLocked) {
				return fmt.Errorf("%w; a running server benchmarks itself every --bench-interval (see its /bench), or stop it to run this command", err)
			}
			if err != nil {
				return err
			}
			defer stores.close()
			svc, err := registry.New(registry.Config{
				PublicURL:        publicURL,
				Upstreams:        upstreams,
				PublicRegistries: rc.publicRegistryList(),
				Fetcher:          stores.ingester.Fetcher,
				Bench:            registry.BenchConfig{QueryTimeout: queryTimeout},
				Logger:           logger,
			}, stores.db, stores.ix)
			if err != nil {
				return err
			}
			defer svc.Close(cmd.Context())
			rep, err := svc.RunBench(cmd.Context(), registry.BenchOnDemand)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(c.stdout, "task set %s: %d queries; index %d public entries (%s); %.0f ms\n",
				rep.TaskSet.Version, rep.TaskSet.Tasks, rep.Registry.Index.Entries, rep.Registry.Index.Version, rep.DurationMs)
			fmt.Fprintf(c.stdout, "%-40s %8s %8s %8s %6s %8s %9s %9s\n", "registry", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "p50 ms", "p99 ms")
			for _, res := range append([]bench.Result{rep.Registry}, rep.Upstreams...) {
				m := res.Measures
				if m == nil {
					fmt.Fprintf(c.stdout, "%-40s did not answer: %s\n", res.Source, res.Error)
					continue
				}
				fmt.Fprintf(c.stdout, "%-40s %8.3f %8.3f %8.3f %6.3f %8.3f %9.2f %9.2f\n", res.Source, m.Recall1, m.Recall5, m.Recall10, m.MRR, m.NDCG10, m.Latency.P50, m.Latency.P99)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&publicURL, "public-url", "http://127.0.0.1:8080", "the registry's public base URL, the source its results are reported under")
	f.StringArrayVar(&upstreams, "upstream", nil, "an upstream ARD registry base URL to measure too (repeatable)")
	f.StringArrayVar(&publicRegistries, "public-registries", []string{"none"}, "public ARD registries to measure too (repeatable; \"none\" asks none)")
	f.DurationVar(&queryTimeout, "query-timeout", 5*time.Second, "bound on one upstream query")
	return cmd
}
