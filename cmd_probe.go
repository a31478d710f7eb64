package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/probe"
)

// facilitatorProbes is the probe schedule of the facilitator's networks and
// the RPC clients it opened for them.
type facilitatorProbes struct {
	sched   *probe.Scheduler
	clients []*ethclient.Client
}

// startFacilitatorProbes probes each network's RPC (chain id read) and settle
// path every interval. A real network is probed over a client of its own,
// so a probe measures the RPC rather than the facilitator's connection
// state; the in-process dev chain is probed through its client.
// names are the --network values in order, rpcs the --rpc values, and
// networks the opened non-dev networks in the same order as their names.
func startFacilitatorProbes(ctx context.Context, db *kv.DB, interval time.Duration, names []string, rpcs map[string]string,
	dev *evm.DevChain, networks []*evm.Network, logger *slog.Logger) (_ *facilitatorProbes, err error) {
	fp := &facilitatorProbes{}
	defer func() {
		if err != nil {
			fp.close(context.Background())
		}
	}()
	var targets []probe.Target
	next := 0
	for _, name := range names {
		var n *evm.Network
		var backend evm.Backend
		if name == "dev" {
			n, backend = dev.Network, dev.Client
		} else {
			if next >= len(networks) {
				return nil, errors.New("probes: fewer networks opened than named")
			}
			n = networks[next]
			next++
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := ethclient.DialContext(dctx, rpcs[name])
			cancel()
			if err != nil {
				return nil, fmt.Errorf("probe client of network %s: %w", name, err)
			}
			fp.clients = append(fp.clients, c)
			backend = c
		}
		targets = append(targets,
			probe.Target{Name: probe.TargetName(n.ID(), probe.PathRPC), Group: n.ID(), Path: probe.PathRPC, Check: probe.RPCCheck(backend, n.ChainID())},
			probe.Target{Name: probe.TargetName(n.ID(), probe.PathSettle), Group: n.ID(), Path: probe.PathSettle, Check: probe.SettleCheck(n, backend)},
		)
	}
	if fp.sched, err = probe.New(db, targets, probe.Options{Interval: interval, Logger: logger}); err != nil {
		return nil, err
	}
	fp.sched.Start(ctx)
	return fp, nil
}

// close stops the schedule, then closes the probe clients.
func (fp *facilitatorProbes) close(ctx context.Context) error {
	if fp == nil {
		return nil
	}
	var errs []error
	if fp.sched != nil {
		errs = append(errs, fp.sched.Close(ctx))
	}
	for _, c := range fp.clients {
		c.Close()
	}
	return errors.Join(errs...)
}

// NetworkAvailability adapts the probe report to the facilitator's status
// types (the facilitator never imports probe).
func (fp *facilitatorProbes) NetworkAvailability(network string) ([]facilitator.PathAvailability, error) {
	report, err := fp.sched.Group(network)
	if err != nil {
		return nil, err
	}
	out := make([]facilitator.PathAvailability, 0, len(report))
	for _, a := range report {
		pa := facilitator.PathAvailability{
			Path: a.Path, Probes: a.Probes, Successes: a.Successes,
			LowerBound: a.LowerBound, Withheld: a.Withheld, WindowDays: a.WindowDays,
		}
		if a.Last != nil {
			at, ok := a.Last.At, a.Last.OK
			pa.LastProbeAt, pa.LastOK, pa.LastError = &at, &ok, a.Last.Error
		}
		out = append(out, pa)
	}
	return out, nil
}
