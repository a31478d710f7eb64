package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/spf13/cobra"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/screen"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/web"
)

// facilitatorConfig holds the facilitator's flags.
type facilitatorConfig struct {
	addr           string
	publicURL      string
	networks       []string
	rpcs           []string
	assets         []string
	signerKeyFile  string
	settleTimeout  time.Duration
	stuckAfter     time.Duration
	sanctionsList  string
	rateLimits     []string
	trustedProxies []string
	probeInterval  time.Duration

	echoNetwork       string
	echoWalletKeyFile string
	echoCapPerAddress int64
	echoCapPerDay     int64
	settlementPrices  []string
}

func (fc *facilitatorConfig) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fc.addr, "facilitator-addr", "127.0.0.1:4020", "facilitator listen address (port 0 picks a free port)")
	f.StringVar(&fc.publicURL, "facilitator-public-url", "", "the facilitator's public base URL, used in problem types (default: http://<facilitator-addr>)")
	f.StringArrayVar(&fc.networks, "network", nil, "network to serve: base, base-sepolia, dev (in-process chain) or eip155:<chainId> (repeatable; default dev)")
	f.StringArrayVar(&fc.rpcs, "rpc", nil, "JSON-RPC URL of a network, NETWORK=URL (repeatable)")
	f.StringArrayVar(&fc.assets, "asset", nil, "token contract of a network, NETWORK=ADDRESS (repeatable; required for eip155:<chainId> networks ardx does not know)")
	f.StringVar(&fc.signerKeyFile, "signer-key-file", "", "file with the gas-paying signer keys, one hex key per line (or set ARDX_SIGNER_KEYS)")
	f.DurationVar(&fc.settleTimeout, "settle-timeout", 25*time.Second, "answer settlement_pending after this long; the settlement goes on in the background")
	f.DurationVar(&fc.stuckAfter, "stuck-after", settle.DefaultStuckAfter, "a broadcast transaction without a receipt this long is sent again, then replaced at a higher fee with the same nonce")
	f.StringVar(&fc.sanctionsList, "sanctions-list", "", "screened addresses: one per line with # comments, or a JSON array; reloaded when it changes")
	f.StringArrayVar(&fc.rateLimits, "rate-limit", nil, "rate-limit bucket NAME=RATE:BURST (settle, payments-read, discovery), or off (repeatable)")
	f.StringArrayVar(&fc.trustedProxies, "trusted-proxy", nil, "CIDR whose X-Forwarded-For is believed (repeatable)")
	f.DurationVar(&fc.probeInterval, "probe-interval", 30*time.Second, "how often each network's RPC and settle path are probed for /status")
	f.StringVar(&fc.echoNetwork, "echo-network", "", "network of the /echo test merchant's terms (CAIP-2 id, v1 name, or dev; default: the first --network)")
	f.StringVar(&fc.echoWalletKeyFile, "echo-wallet-key-file", "", "file with the hex key of the /echo wallet: payTo of its terms, sender and gas payer of its refunds (default on the dev chain: the dev merchant)")
	f.Int64Var(&fc.echoCapPerAddress, "echo-cap-per-address", facilitator.DefaultEchoCapPerAddress, "/echo payments per payer address per UTC day")
	f.Int64Var(&fc.echoCapPerDay, "echo-cap-per-day", facilitator.DefaultEchoCapPerDay, "/echo payments in total per UTC day")
	f.StringArrayVar(&fc.settlementPrices, "settlement-price", nil, "price of a settlement in USD, NETWORK=USD (repeatable; mainnets default to "+facilitator.DefaultMainnetSettlementPriceUSD+", testnets and dev are free)")
}

// pairs parses NETWORK=VALUE flags into a map keyed by network.
func pairs(flag string, values []string) (map[string]string, error) {
	m := map[string]string{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" || val == "" {
			return nil, fmt.Errorf("--%s %q: want NETWORK=VALUE", flag, v)
		}
		m[k] = val
	}
	return m, nil
}

// readSignerKeys reads hex private keys, one per line, from the file or from
// ARDX_SIGNER_KEYS. Errors never echo key material.
func readSignerKeys(file string, getenv func(string) string) ([]*ecdsa.PrivateKey, error) {
	var text, origin string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--signer-key-file: %w", err)
		}
		text, origin = string(b), "--signer-key-file"
	case getenv("ARDX_SIGNER_KEYS") != "":
		text, origin = getenv("ARDX_SIGNER_KEYS"), "ARDX_SIGNER_KEYS"
	default:
		return nil, nil
	}
	var keys []*ecdsa.PrivateKey
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ",", "\n")))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := crypto.HexToECDSA(strings.TrimPrefix(s, "0x"))
		if err != nil {
			return nil, fmt.Errorf("%s: key %d is not a hex secp256k1 private key", origin, line)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// runningFacilitator is a started facilitator and what it owns.
type runningFacilitator struct {
	db       *kv.DB
	ownDB    bool
	networks []*evm.Network
	dev      *evm.DevChain
	screen   *screen.List
	engine   *settle.Engine
	probes   *facilitatorProbes
	catalog  *facilitator.Catalogue
	svc      *facilitator.Service
	srv      *web.Server

	detachMetrics func()
}

func (r *runningFacilitator) close(ctx context.Context) error {
	var errs []error
	if r.detachMetrics != nil {
		r.detachMetrics()
	}
	if r.svc != nil {
		errs = append(errs, r.svc.Close(ctx)) // /health turns 503
	}
	if r.engine != nil {
		// The engine lets settlements due within a block or two finish
		// (settle.CloseGrace) and leaves the rest pending for the next
		// start, which answers the requests waiting on them: then the
		// listener drains at once, and a stop takes seconds whatever the
		// backlog.
		errs = append(errs, r.engine.Close(ctx))
	}
	if r.srv != nil {
		errs = append(errs, r.srv.Close(ctx))
	}
	// Probes stop before the networks they probe close.
	errs = append(errs, r.probes.close(ctx))
	if r.catalog != nil {
		// After the engine: settlements finishing during its close are
		// still catalogued.
		r.catalog.Close()
	}
	for _, n := range r.networks {
		errs = append(errs, n.Close())
	}
	if r.dev != nil {
		errs = append(errs, r.dev.Close())
	}
	if r.screen != nil {
		errs = append(errs, r.screen.Close())
	}
	if r.ownDB {
		errs = append(errs, r.db.Close())
	}
	return errors.Join(errs...)
}

// startFacilitator opens the networks, starts the listener, then resolves
// the settlements a previous process left pending in the background: the
// service answers /health whatever the backlog, and a network whose RPC
// does not answer starts withdrawn. db may be shared with the registry (serve); when nil
// the facilitator opens the data dir itself.
func (c *cli) startFacilitator(ctx context.Context, fc *facilitatorConfig, db *kv.DB, logger *slog.Logger) (_ *runningFacilitator, err error) {
	svcLog := logger
	logger = logger.With("component", "facilitator")
	rf := &runningFacilitator{db: db}
	defer func() {
		if err != nil {
			rf.close(context.Background())
		}
	}()
	if rf.db == nil {
		if rf.db, err = kv.Open(c.global.dataDir, kv.Options{}); err != nil {
			return nil, err
		}
		rf.ownDB = true
	}
	rpcs, err := pairs("rpc", fc.rpcs)
	if err != nil {
		return nil, err
	}
	assets, err := pairs("asset", fc.assets)
	if err != nil {
		return nil, err
	}
	keys, err := readSignerKeys(fc.signerKeyFile, c.getenv)
	if err != nil {
		return nil, err
	}
	buckets, off, err := facilitator.ParseRateLimits(strings.Join(fc.rateLimits, ","))
	if err != nil {
		return nil, fmt.Errorf("--rate-limit: %w", err)
	}
	if off {
		logger.Warn("rate limiting is off (--rate-limit off): for benchmarks and local load tests only")
	}
	var trusted []netip.Prefix
	for _, s := range fc.trustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxy %q: %w", s, err)
		}
		trusted = append(trusted, p)
	}
	names := fc.networks
	if len(names) == 0 {
		names = []string{"dev"}
	}
	var chains []settle.Chain
	var facts []facilitator.NetworkFacts
	for _, name := range names {
		var n *evm.Network
		if name == "dev" {
			if rf.dev != nil {
				return nil, errors.New("--network dev given twice")
			}
			// The dev chain keeps its state in the data dir, so the
			// transactions recorded before a crash exist after it.
			if rf.dev, err = evm.OpenDevChain(ctx, logger, filepath.Join(c.global.dataDir, "devchain")); err != nil {
				return nil, fmt.Errorf("dev chain: %w", err)
			}
			n = rf.dev.Network
			if err := c.announceDevAccounts(rf.dev, logger); err != nil {
				return nil, err
			}
		} else {
			if len(keys) == 0 {
				return nil, fmt.Errorf("--network %s needs signer keys: --signer-key-file or ARDX_SIGNER_KEYS", name)
			}
			rpc := rpcs[name]
			if rpc == "" {
				return nil, fmt.Errorf("--network %s needs --rpc %s=URL", name, name)
			}
			cfg := evm.NetworkConfig{Name: name, RPC: rpc, Asset: assets[name], SignerKeys: keys, Logger: logger}
			if id, ok := evm.ChainIDOf(name); ok && id.Int64() == evm.DevChainID {
				// A local node on the dev chain id (geth --dev) answers to the
				// v1 name "dev" too, as the in-process dev chain does: v1 has
				// no name of its own for chain 1337.
				cfg.V1Name = evm.DevV1Name
			}
			if n, err = evm.Open(ctx, cfg); err != nil {
				return nil, fmt.Errorf("network %s: %w", name, err)
			}
			rf.networks = append(rf.networks, n)
		}
		chains = append(chains, n)
		facts = append(facts, n)
	}
	if fc.sanctionsList != "" {
		if rf.screen, err = screen.Open(fc.sanctionsList, logger.With("component", "screen")); err != nil {
			return nil, fmt.Errorf("--sanctions-list: %w", err)
		}
	}
	if fc.echoCapPerAddress < 1 || fc.echoCapPerDay < 1 {
		return nil, errors.New("--echo-cap-per-address and --echo-cap-per-day must be at least 1")
	}
	prices, err := facilitator.ParseSettlementPrices(fc.settlementPrices, facts)
	if err != nil {
		return nil, err
	}
	if rf.catalog, err = facilitator.NewCatalogue(rf.db, svcLog); err != nil {
		return nil, err
	}
	echo, err := c.echoConfig(ctx, fc, rf, chains, logger)
	if err != nil {
		return nil, err
	}
	opts := settle.Options{SettleTimeout: fc.settleTimeout, StuckAfter: fc.stuckAfter, Logger: logger, OnSettled: rf.catalog.OnSettled}
	if opts.Failpoint, err = crashFailpoint(c.getenv("ARDX_TEST_CRASH_AT"), logger); err != nil {
		return nil, err
	}
	if rf.screen != nil {
		opts.Screener = rf.screen
	}
	if rf.engine, err = settle.NewEngine(rf.db, chains, opts); err != nil {
		return nil, err
	}
	if rf.probes, err = startFacilitatorProbes(ctx, rf.db, fc.probeInterval, names, rpcs, rf.dev, rf.networks, logger); err != nil {
		return nil, err
	}
	ln, err := web.Listen("facilitator", fc.addr)
	if err != nil {
		return nil, err
	}
	publicURL := strings.TrimRight(fc.publicURL, "/")
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	rf.svc, err = facilitator.New(facilitator.Config{
		PublicURL:      publicURL,
		Logger:         svcLog,
		Networks:       facts,
		RateLimits:     buckets,
		RateLimitsOff:  off,
		TrustedProxies: trusted,
		Screening:      rf.screen,
		Availability:   rf.probes,
		Version:        version,
		Echo:           echo,
		Catalogue:      rf.catalog,
		Prices:         prices,
	}, rf.engine)
	if err != nil {
		ln.Close()
		return nil, err
	}
	rf.srv = &web.Server{Name: "facilitator", Listener: ln, Handler: c.withMetricsRoute(rf.svc.Handler()), Logger: logger,
		WriteTimeout: fc.settleTimeout + 30*time.Second}
	if err := rf.srv.Open(); err != nil {
		return nil, err
	}
	c.started.facilitatorURL = rf.srv.URL()
	rf.detachMetrics = collector.attach(nil, rf.db, rf.engine)
	c.db = rf.db
	rf.engine.StartReconciling()
	return rf, nil
}

// crashFailpoint parses ARDX_TEST_CRASH_AT, "POINT:N" (POINT one of the
// settle.Failpoint* names): the process kills itself with SIGKILL the Nth
// time settlement reaches POINT. Crash tests use it to die exactly between
// recording and sending, after sending, or during start-up reconciliation;
// never set it otherwise. "" returns nil.
func crashFailpoint(spec string, logger *slog.Logger) (func(string), error) {
	if spec == "" {
		return nil, nil
	}
	point, nth, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n < 1 || (point != settle.FailpointBeforeBroadcast && point != settle.FailpointAfterBroadcast && point != settle.FailpointReconcile) {
		return nil, fmt.Errorf("ARDX_TEST_CRASH_AT %q: want POINT:N with POINT %s, %s or %s", spec, settle.FailpointBeforeBroadcast, settle.FailpointAfterBroadcast, settle.FailpointReconcile)
	}
	logger.Warn("crash test failpoint armed: this process kills itself", "point", point, "at", n)
	var hits atomic.Int64
	return func(p string) {
		if p == point && hits.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}, nil
}

// echoConfig resolves the /echo merchant's network and wallet. A network
// this facilitator does not serve, or one without a wallet, is not an error:
// /echo/status says why it is not serving and /echo answers 503.
func (c *cli) echoConfig(ctx context.Context, fc *facilitatorConfig, rf *runningFacilitator, chains []settle.Chain, logger *slog.Logger) (*facilitator.EchoConfig, error) {
	devID := ""
	if rf.dev != nil {
		devID = rf.dev.Network.ID()
	}
	name := facilitator.EchoNetworkName(echoNetworkOrDefault(fc.echoNetwork, chains), devID)
	echo := &facilitator.EchoConfig{Network: name, DB: rf.db, CapPerAddress: fc.echoCapPerAddress, CapPerDay: fc.echoCapPerDay}
	var net *evm.Network
	for _, ch := range chains {
		if n, ok := ch.(*evm.Network); ok && (n.ID() == name || (n.V1Name() != "" && n.V1Name() == name)) {
			net = n
		}
	}
	if net == nil {
		echo.NotServing = fmt.Sprintf("network %s is not served by this facilitator (add --network %s, or set --echo-network)", name, name)
		logger.Info("/echo is not serving", "reason", echo.NotServing)
		c.started.echoNotServing = echo.NotServing
		return echo, nil
	}
	echo.Chain = net
	switch {
	case fc.echoWalletKeyFile != "":
		keys, err := readSignerKeys(fc.echoWalletKeyFile, func(string) string { return "" })
		if err != nil {
			return nil, fmt.Errorf("--echo-wallet-key-file: %w", err)
		}
		if len(keys) != 1 {
			return nil, fmt.Errorf("--echo-wallet-key-file: want exactly one key, found %d", len(keys))
		}
		echo.WalletKey = keys[0]
	case rf.dev != nil && net == rf.dev.Network:
		// On the dev chain the dev merchant is the echo wallet; make sure it
		// holds gas for the refunds.
		echo.WalletKey = rf.dev.MerchantKey
		bal, err := rf.dev.ETHBalance(ctx, rf.dev.Merchant)
		if err != nil {
			return nil, fmt.Errorf("dev chain: %w", err)
		}
		if floor := big.NewInt(1e17); bal.Cmp(floor) < 0 {
			if err := rf.dev.FundETH(ctx, rf.dev.Merchant, big.NewInt(1e18)); err != nil {
				return nil, fmt.Errorf("dev chain: fund echo wallet: %w", err)
			}
		}
	default:
		echo.NotServing = fmt.Sprintf("no --echo-wallet-key-file for network %s", name)
		logger.Info("/echo is not serving", "reason", echo.NotServing)
		c.started.echoNotServing = echo.NotServing
	}
	if echo.NotServing == "" {
		c.started.echoNetwork = name
	}
	return echo, nil
}

// echoNetworkOrDefault is --echo-network, or when it is not given the
// first network served, so /echo works on whatever the facilitator runs.
func echoNetworkOrDefault(flag string, chains []settle.Chain) string {
	if flag == "" && len(chains) > 0 {
		return chains[0].ID()
	}
	return flag
}

func (c *cli) facilitatorCmd() *cobra.Command {
	var fc facilitatorConfig
	cmd := &cobra.Command{
		Use:   "facilitator",
		Short: "Run the x402 payment facilitator alone",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.runServices(cmd.Context(), func(ctx context.Context, logger *slog.Logger) (closer, error) {
				rf, err := c.startFacilitator(ctx, &fc, nil, logger)
				if err != nil {
					return nil, err
				}
				return rf.close, nil
			})
		},
	}
	fc.flags(cmd)
	c.serverFlags(cmd)
	return cmd
}

func (c *cli) serveCmd() *cobra.Command {
	var rc registryConfig
	var fc facilitatorConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the registry and the facilitator on separate listeners",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var reg *runningRegistry
			return c.runServices(cmd.Context(),
				func(ctx context.Context, logger *slog.Logger) (closer, error) {
					var err error
					if reg, err = c.startRegistry(ctx, &rc, logger); err != nil {
						return nil, err
					}
					return reg.close, nil
				},
				func(ctx context.Context, logger *slog.Logger) (closer, error) {
					// The facilitator shares the registry's kv file: one
					// data dir, one bbolt lock.
					rf, err := c.startFacilitator(ctx, &fc, reg.stores.db, logger)
					if err != nil {
						return nil, err
					}
					if err := sellCreditsThrough(reg, rf, rc.payments, logger); err != nil {
						rf.close(ctx)
						return nil, err
					}
					return rf.close, nil
				})
		},
	}
	rc.flags(cmd)
	fc.flags(cmd)
	c.serverFlags(cmd)
	return cmd
}

// sellCreditsThrough points the registry's sale of credits at the built-in
// facilitator, unless --facilitator-url named another: on its dev chain when
// it runs one, else its first network, paid to --pay-to or, on the dev
// chain, to the dev merchant account. The
// registry still calls it over HTTP, like any merchant.
func sellCreditsThrough(reg *runningRegistry, rf *runningFacilitator, p registry.PaymentsConfig, logger *slog.Logger) error {
	if p.FacilitatorURL != "" {
		return nil
	}
	p.FacilitatorURL = rf.srv.URL()
	switch {
	case p.Network != "":
	case rf.dev != nil:
		p.Network = rf.dev.Network.ID()
	case len(rf.networks) > 0:
		p.Network = rf.networks[0].ID()
	}
	if p.PayTo == "" && rf.dev != nil {
		p.PayTo = rf.dev.Merchant.Hex()
	}
	if p.PayTo == "" || p.Network == "" {
		logger.Info("registry sells no credits: give --pay-to (and --pay-network) to sell them through the built-in facilitator", "component", "registry")
		return nil
	}
	return reg.svc.SetPayments(p)
}

func (c *cli) payCmd() *cobra.Command {
	var opts facilitator.PayOptions
	cmd := &cobra.Command{
		Use:   "pay",
		Short: "Sign an EIP-3009 authorization and call /verify then /settle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Stdout = c.stdout
			return facilitator.Pay(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.FacilitatorURL, "facilitator", "http://127.0.0.1:4020", "the facilitator's base URL")
	f.StringVar(&opts.Network, "network", "dev", "network: a v1 name (base-sepolia) or CAIP-2 id (eip155:84532)")
	f.StringVar(&opts.To, "to", "", "recipient (payTo) address")
	f.StringVar(&opts.Amount, "amount", "", "amount in the asset's units, e.g. 0.01")
	f.StringVar(&opts.KeyFile, "key-file", "", "file with the payer's hex private key")
	f.IntVar(&opts.X402Version, "x402-version", 2, "x402 protocol version, 1 or 2")
	for _, name := range []string{"to", "amount", "key-file"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// announceDevAccounts logs the dev chain's funded test accounts and writes
// the payer's key to <data>/dev-payer.key, so a new user can try
// `ardx pay --key-file` at once. The keys are fixed test keys that guard
// nothing; real signer keys never reach a log.
func (c *cli) announceDevAccounts(d *evm.DevChain, logger *slog.Logger) error {
	keyFile := filepath.Join(c.global.dataDir, "dev-payer.key")
	hexKey := hex.EncodeToString(crypto.FromECDSA(d.PayerKey))
	if err := os.MkdirAll(c.global.dataDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, []byte(hexKey+"\n"), 0o600); err != nil {
		return fmt.Errorf("write dev payer key: %w", err)
	}
	c.started.dev = &devAccounts{network: d.Network.ID(), payer: d.Payer.Hex(), payerKeyFile: keyFile, merchant: d.Merchant.Hex()}
	logger.Info("dev chain ready (test keys, they guard nothing)",
		"network", d.Network.ID(), "v1_name", d.Network.V1Name(), "usdc", d.Asset.Hex(),
		"payer", d.Payer.Hex(), "payer_key", hexKey, "payer_key_file", keyFile,
		"merchant", d.Merchant.Hex(), "merchant_key", hex.EncodeToString(crypto.FromECDSA(d.MerchantKey)),
		"signer", d.Signer.Hex())
	return nil
}
