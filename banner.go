package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// startupInfo collects what the start-up banner shows as the services start.
type startupInfo struct {
	registryURL    string
	facilitatorURL string
	metricsURL     string
	dev            *devAccounts // nil without the dev chain
	echoNetwork    string       // where /echo settles; "" when it is not serving
	echoNotServing string
}

// devAccounts are the dev chain's funded test accounts.
type devAccounts struct {
	network, payer, payerKeyFile, merchant string
}

// printBanner writes a short summary a person can act on: the URLs to open,
// the data dir, and on the dev chain the accounts to pay with. It is printed
// only on a terminal (runServices); logs stay structured elsewhere.
func printBanner(w io.Writer, dataDir string, s *startupInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ardx %s\n", version)
	if s.registryURL != "" {
		fmt.Fprintf(tw, "  registry\t%s/\t(search: POST /search; API: /openapi.json; pages: /tools)\n", s.registryURL)
	}
	if s.facilitatorURL != "" {
		fmt.Fprintf(tw, "  facilitator\t%s/\t(pages: /status, /integrate, /pricing; API: /openapi.json)\n", s.facilitatorURL)
	}
	if s.metricsURL != "" {
		fmt.Fprintf(tw, "  metrics\t%s\t\n", s.metricsURL)
	}
	fmt.Fprintf(tw, "  data\t%s\t\n", dataDir)
	if s.dev != nil {
		fmt.Fprintf(tw, "  dev chain\t%s\t(test keys that guard nothing)\n", s.dev.network)
		fmt.Fprintf(tw, "    payer\t%s\tkey file %s\n", s.dev.payer, s.dev.payerKeyFile)
		fmt.Fprintf(tw, "    merchant\t%s\t\n", s.dev.merchant)
	}
	if s.facilitatorURL != "" {
		if s.echoNetwork != "" {
			fmt.Fprintf(tw, "  /echo\tsettles on %s\t\n", s.echoNetwork)
		} else if s.echoNotServing != "" {
			fmt.Fprintf(tw, "  /echo\tnot serving: %s\t\n", s.echoNotServing)
		}
	}
	tw.Flush()
	if s.dev != nil && s.facilitatorURL != "" {
		fmt.Fprintf(w, "  try: ardx pay --facilitator %s --network dev --to %s --amount 0.01 --key-file %s\n",
			s.facilitatorURL, s.dev.merchant, s.dev.payerKeyFile)
	}
	fmt.Fprintln(w, "  Ctrl-C stops.")
}
