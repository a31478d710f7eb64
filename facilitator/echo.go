package facilitator

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Defaults of the echo merchant.
const (
	// DefaultEchoCapPerAddress is how many echo payments one payer address
	// may make per UTC day: enough to try a client a few times, too few to
	// farm the operator's gas.
	DefaultEchoCapPerAddress = 10
	// DefaultEchoCapPerDay bounds all echo payments per UTC day, and with it
	// the gas the operator spends on refunds (about 1000 x 50k gas).
	DefaultEchoCapPerDay = 1000
	// EchoPriceUSD is the price of GET /echo, refunded in full.
	EchoPriceUSD = "0.001"
	// echoTimeoutSeconds is the maxTimeoutSeconds of the echo terms.
	echoTimeoutSeconds = 60
	// echoRefundTimeout bounds the wait for the refund's receipt.
	echoRefundTimeout = 90 * time.Second
	// echoStatusTTL is how long a wallet balance read is reused, so /echo
	// does not cost an RPC call per request.
	echoStatusTTL = 5 * time.Second
)

// EchoChain is what the echo merchant needs of its network; *evm.Network
// implements it.
type EchoChain interface {
	ID() string
	V1Name() string
	Available() (bool, string)
	Asset() string
	Decimals() uint8
	RequirementsV2(payTo string, amount *big.Int, maxTimeoutSeconds int) x402.PaymentRequirementsV2
	RequirementsV1(payTo string, amount *big.Int, maxTimeoutSeconds int, resource, description string) x402.PaymentRequirementsV1
	// SendToken transfers the asset from key's address, which pays the gas,
	// and waits for the receipt.
	SendToken(ctx context.Context, key *ecdsa.PrivateKey, to common.Address, amount *big.Int) (string, error)
	// GasBalance returns an address's native balance in wei.
	GasBalance(ctx context.Context, who common.Address) (*big.Int, error)
}

// EchoConfig configures the test merchant at GET /echo.
type EchoConfig struct {
	// Network is the configured network name, shown by /echo/status.
	Network string
	// Chain is the network the terms name; nil means /echo is not serving
	// and NotServing says why.
	Chain EchoChain
	// WalletKey is the operator wallet: payTo of the terms, sender (and gas
	// payer) of the refund. nil means not serving.
	WalletKey *ecdsa.PrivateKey
	// NotServing, when set, is why /echo answers 503 (found at start-up).
	NotServing string
	// DB records payments and refunds, so the caps survive restarts.
	DB *kv.DB
	// CapPerAddress and CapPerDay bound the payments per payer address per
	// UTC day and in total per UTC day; zero means the defaults.
	CapPerAddress, CapPerDay int64
	// MinGasWei is the wallet's native balance below which /echo stops
	// serving; nil means 0.0001 ETH.
	MinGasWei *big.Int
	// Now is the clock of the caps' days; nil means time.Now.
	Now func() time.Time
}

// echoMerchant is the running /echo.
type echoMerchant struct {
	cfg      EchoConfig
	wallet   common.Address
	amount   *big.Int
	refundMu sync.Mutex // one refund at a time: the wallet's nonce

	mu        sync.Mutex
	checked   time.Time
	gas       *big.Int
	gasErr    string
	statusNow func() time.Time
}

func newEchoMerchant(cfg *EchoConfig) *echoMerchant {
	if cfg == nil {
		return nil
	}
	c := *cfg
	if c.CapPerAddress <= 0 {
		c.CapPerAddress = DefaultEchoCapPerAddress
	}
	if c.CapPerDay <= 0 {
		c.CapPerDay = DefaultEchoCapPerDay
	}
	if c.MinGasWei == nil {
		c.MinGasWei = big.NewInt(100_000_000_000_000)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	m := &echoMerchant{cfg: c, statusNow: time.Now}
	if c.WalletKey != nil {
		m.wallet = crypto.PubkeyToAddress(c.WalletKey.PublicKey)
	}
	if c.Chain != nil {
		// 0.001 USD of a USD stablecoin: 10^(decimals-3) smallest units.
		m.amount = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.Chain.Decimals())-3), nil)
	}
	return m
}

// EchoStatus is the body of GET /echo/status.
type EchoStatus struct {
	Serving  bool   `json:"serving"`
	Reason   string `json:"reason,omitempty"`
	Network  string `json:"network"`
	PriceUSD string `json:"priceUsd"`
	// Amount is the price in the asset's smallest unit.
	Amount string     `json:"amount,omitempty"`
	Asset  string     `json:"asset,omitempty"`
	PayTo  string     `json:"payTo,omitempty"`
	Wallet EchoWallet `json:"wallet"`
	Caps   EchoCaps   `json:"caps"`
}

// EchoWallet is the refund wallet's state.
type EchoWallet struct {
	Address       string `json:"address,omitempty"`
	GasBalanceWei string `json:"gasBalanceWei,omitempty"`
	MinGasWei     string `json:"minGasWei"`
}

// EchoCaps are the caps and today's use.
type EchoCaps struct {
	PerAddressPerDay int64  `json:"perAddressPerDay"`
	PerDay           int64  `json:"perDay"`
	Day              string `json:"day"`
	UsedToday        int64  `json:"usedToday"`
}

func (m *echoMerchant) day() string { return m.cfg.Now().UTC().Format(time.DateOnly) }

// status says whether /echo can serve now: configured, network available,
// refund wallet holding gas. The balance read is cached for echoStatusTTL.
func (m *echoMerchant) status(ctx context.Context) EchoStatus {
	st := EchoStatus{Network: m.cfg.Network, PriceUSD: EchoPriceUSD,
		Wallet: EchoWallet{MinGasWei: m.cfg.MinGasWei.String()},
		Caps:   EchoCaps{PerAddressPerDay: m.cfg.CapPerAddress, PerDay: m.cfg.CapPerDay, Day: m.day()}}
	if m.cfg.DB != nil {
		st.Caps.UsedToday, _, _ = m.cfg.DB.EchoCounts(st.Caps.Day, "")
	}
	switch {
	case m.cfg.NotServing != "":
		st.Reason = m.cfg.NotServing
		return st
	case m.cfg.Chain == nil:
		st.Reason = "no echo network is configured (--echo-network)"
		return st
	case m.cfg.WalletKey == nil:
		st.Reason = "no echo wallet is configured (--echo-wallet-key-file)"
		return st
	case m.cfg.DB == nil:
		st.Reason = "the echo merchant has no store for its caps"
		return st
	}
	st.Network, st.Amount, st.Asset = m.cfg.Chain.ID(), m.amount.String(), m.cfg.Chain.Asset()
	st.PayTo, st.Wallet.Address = m.wallet.Hex(), m.wallet.Hex()
	if ok, why := m.cfg.Chain.Available(); !ok {
		st.Reason = "network " + m.cfg.Chain.ID() + " is unavailable: " + why
		return st
	}
	gas, gasErr := m.gasBalance(ctx)
	if gasErr != "" {
		st.Reason = "cannot read the refund wallet's balance: " + gasErr
		return st
	}
	st.Wallet.GasBalanceWei = gas.String()
	if gas.Cmp(m.cfg.MinGasWei) < 0 {
		st.Reason = fmt.Sprintf("the refund wallet %s holds %s wei of gas money, under the %s wei minimum", m.wallet.Hex(), gas, m.cfg.MinGasWei)
		return st
	}
	st.Serving = true
	return st
}

func (m *echoMerchant) gasBalance(ctx context.Context) (*big.Int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.statusNow()
	if !m.checked.IsZero() && now.Sub(m.checked) < echoStatusTTL {
		return m.gas, m.gasErr
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gas, err := m.cfg.Chain.GasBalance(ctx, m.wallet)
	m.checked, m.gas, m.gasErr = now, gas, ""
	if err != nil {
		m.gasErr = err.Error()
	}
	return m.gas, m.gasErr
}

// invalidateGas forgets the cached balance after a refund spent gas.
func (m *echoMerchant) invalidateGas() {
	m.mu.Lock()
	m.checked = time.Time{}
	m.mu.Unlock()
}

// echoBazaar is the bazaar declaration of GET /echo, so paying it
// catalogues it: an HTTP GET answering JSON, with a schema of the info.
var echoBazaar = json.RawMessage(`{"info":{"input":{"type":"http","method":"GET"},"output":{"type":"json","example":{"echo":{"method":"GET","path":"/echo"},"paid":{"success":true,"refund":{"transaction":"0x..."}}}}},` +
	`"schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["input"],"properties":{"input":{"type":"object","required":["type","method"],"properties":{"type":{"const":"http"},"method":{"enum":["GET"]}}},"output":{"type":"object"}}}}`)

// echoOutputSchema is the v1 carrier of the same declaration.
var echoOutputSchema = json.RawMessage(`{"input":{"type":"http","method":"GET"},"output":{"type":"json"}}`)

const echoDescription = "ardx test merchant: pays 0.001 USD and refunds it in full in the same request"

func (s *Service) echoResource() string { return s.cfg.PublicURL + "/echo" }

func (m *echoMerchant) termsV2() x402.PaymentRequirementsV2 {
	return m.cfg.Chain.RequirementsV2(m.wallet.Hex(), m.amount, echoTimeoutSeconds)
}

func (m *echoMerchant) termsV1(resource string) (x402.PaymentRequirementsV1, bool) {
	if m.cfg.Chain.V1Name() == "" {
		return x402.PaymentRequirementsV1{}, false
	}
	req := m.cfg.Chain.RequirementsV1(m.wallet.Hex(), m.amount, echoTimeoutSeconds, resource, echoDescription)
	req.MimeType, req.OutputSchema = "application/json", echoOutputSchema
	return req, true
}

// writePaymentRequired answers 402 with the echo terms in both forms: the
// v2 PAYMENT-REQUIRED header and the v1 body with accepts. reason is the
// error both carry ("" for the header-is-required defaults).
func (s *Service) writePaymentRequired(w http.ResponseWriter, reason string, settled *x402.SettleResponse, version int) {
	m := s.echo
	v2Err, v1Err := reason, reason
	if reason == "" {
		v2Err, v1Err = "PAYMENT-SIGNATURE header is required", "X-PAYMENT header is required"
	}
	pr := x402.PaymentRequiredV2{
		X402Version: x402.Version2, Error: v2Err,
		Resource:   &x402.ResourceInfo{URL: s.echoResource(), Description: echoDescription, MimeType: "application/json"},
		Accepts:    []x402.PaymentRequirementsV2{m.termsV2()},
		Extensions: map[string]json.RawMessage{"bazaar": echoBazaar},
	}
	hdr, err := x402.EncodeHeader(pr)
	if err == nil {
		w.Header().Set(x402.HeaderPaymentRequired, hdr)
	}
	if settled != nil {
		if v, err := x402.EncodeHeader(settled); err == nil {
			if version == x402.Version1 {
				w.Header().Set(x402.HeaderXPaymentResponse, v)
			} else {
				w.Header().Set(x402.HeaderPaymentResponse, v)
			}
		}
	}
	body := x402.PaymentRequiredV1{X402Version: x402.Version1, Error: v1Err, Accepts: []x402.PaymentRequirementsV1{}}
	if v1, ok := m.termsV1(s.echoResource()); ok {
		body.Accepts = append(body.Accepts, v1)
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusPaymentRequired, body)
}

// echoPayment is a decoded payment header bound to the echo terms.
type echoPayment struct {
	version int
	payer   string
	body    []byte // the /settle request body built from header and terms
}

// decodeEchoPayment reads the PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1)
// header and checks it pays the echo terms. ok false with reason means
// no usable payment: answer 402 with it.
func (s *Service) decodeEchoPayment(r *http.Request) (p echoPayment, reason string) {
	m := s.echo
	if v := r.Header.Get(x402.HeaderPaymentSignature); v != "" {
		payload, err := x402.DecodePaymentSignature(v)
		if err != nil {
			return p, "invalid PAYMENT-SIGNATURE header: " + err.Error()
		}
		terms := m.termsV2()
		a := payload.Accepted
		if a.Scheme != terms.Scheme || a.Network != terms.Network || a.Amount != terms.Amount ||
			!x402.EqualAddress(a.Asset, terms.Asset) || !x402.EqualAddress(a.PayTo, terms.PayTo) {
			return p, "the payment does not accept the terms of /echo (scheme, network, amount, asset or payTo differ)"
		}
		if payload.Payload.Authorization == nil {
			return p, "the payment carries no EIP-3009 authorization"
		}
		body, err := json.Marshal(x402.NewRequestV2(payload, terms))
		if err != nil {
			return p, "the payment cannot be encoded: " + err.Error()
		}
		return echoPayment{version: x402.Version2, payer: payload.Payload.Authorization.From, body: body}, ""
	}
	if v := r.Header.Get(x402.HeaderXPayment); v != "" {
		payload, err := x402.DecodeXPayment(v)
		if err != nil {
			return p, "invalid X-PAYMENT header: " + err.Error()
		}
		terms, ok := m.termsV1(s.echoResource())
		if !ok {
			return p, "the echo network has no x402 v1 name; pay with PAYMENT-SIGNATURE (v2)"
		}
		if payload.Scheme != terms.Scheme || payload.Network != terms.Network {
			return p, "the payment does not accept the terms of /echo (scheme or network differ)"
		}
		if payload.Payload.Authorization == nil {
			return p, "the payment carries no EIP-3009 authorization"
		}
		body, err := json.Marshal(x402.NewRequestV1(payload, terms))
		if err != nil {
			return p, "the payment cannot be encoded: " + err.Error()
		}
		return echoPayment{version: x402.Version1, payer: payload.Payload.Authorization.From, body: body}, ""
	}
	return p, ""
}

// EchoResponse is the body of a paid GET /echo.
type EchoResponse struct {
	Echo EchoRequest `json:"echo"`
	Paid EchoPaid    `json:"paid"`
}

// EchoRequest echoes what was asked.
type EchoRequest struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	Query       string `json:"query,omitempty"`
	X402Version int    `json:"x402Version"`
}

// EchoPaid is the settlement and its refund.
type EchoPaid struct {
	Success     bool       `json:"success"`
	Network     string     `json:"network"`
	Asset       string     `json:"asset"`
	Amount      string     `json:"amount"`
	Payer       string     `json:"payer"`
	Transaction string     `json:"transaction"`
	Refund      EchoRefund `json:"refund"`
	// Replayed is true when this payment was answered before and the
	// recorded result is returned (no second settlement or refund).
	Replayed bool `json:"replayed,omitempty"`
}

// EchoRefund is the refund of an echo payment.
type EchoRefund struct {
	Status      kv.EchoState `json:"status"`
	Transaction string       `json:"transaction,omitempty"`
	Amount      string       `json:"amount"`
	Error       string       `json:"error,omitempty"`
}

// handleEchoStatus handles "GET /echo/status".
func (s *Service) handleEchoStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.echo == nil {
		web.WriteJSON(w, http.StatusOK, EchoStatus{Reason: "the echo merchant is not configured", PriceUSD: EchoPriceUSD})
		return
	}
	web.WriteJSON(w, http.StatusOK, s.echo.status(r.Context()))
}

// handleEcho handles "GET /echo": 402 with the terms without a payment; with
// one, settlement through this facilitator's engine, a full refund from the
// echo wallet, and 200 with PAYMENT-RESPONSE (v1: X-PAYMENT-RESPONSE).
func (s *Service) handleEcho(w http.ResponseWriter, r *http.Request) {
	m := s.echo
	if m == nil {
		s.problems.Write(w, r, s.problems.New(web.SlugServiceUnavailable, "the echo merchant is not configured"))
		return
	}
	if st := m.status(r.Context()); !st.Serving {
		p := s.problems.New(web.SlugServiceUnavailable, "/echo is not serving: "+st.Reason)
		p.RetryAfter = 60
		s.problems.Write(w, r, p)
		return
	}
	pay, reason := s.decodeEchoPayment(r)
	if pay.body == nil {
		s.writePaymentRequired(w, reason, nil, x402.Version2)
		return
	}
	if !x402.IsAddress(pay.payer) {
		s.writePaymentRequired(w, "the authorization's from is not an address", nil, pay.version)
		return
	}
	id, err := settle.BodyKey(pay.body)
	if err != nil {
		s.writePaymentRequired(w, "the payment cannot be canonicalised: "+err.Error(), nil, pay.version)
		return
	}
	now := m.cfg.Now().UTC()
	rec, err := m.cfg.DB.ReserveEchoPayment(kv.EchoPayment{
		ID: id, Day: now.Format(time.DateOnly), Payer: pay.payer, Network: m.cfg.Chain.ID(),
		Amount: m.amount.String(), CreatedAt: now, UpdatedAt: now,
	}, m.cfg.CapPerAddress, m.cfg.CapPerDay)
	var capErr *kv.EchoCapError
	switch {
	case errors.As(err, &capErr):
		p := s.problems.New(web.SlugTooManyRequests, fmt.Sprintf("the echo cap of %d payments per %s per UTC day is reached; try again tomorrow (UTC)", capErr.Limit, capErr.Scope))
		p.RetryAfter = secondsToNextUTCDay(now)
		s.problems.Write(w, r, p)
		return
	case errors.Is(err, kv.ErrEchoPaymentExists):
		switch rec.State {
		case kv.EchoSettling:
			s.problems.Write(w, r, s.problems.New(web.SlugConflict, "this payment is being settled by another request; send it again in a few seconds"))
			return
		case kv.EchoPending:
			// The engine answers the identical body with its final outcome
			// once there is one; carry on as for a new payment.
		default:
			s.writeEchoPaid(w, r, pay, rec, true)
			return
		}
	case err != nil:
		s.problems.Write(w, r, err)
		return
	}
	s.settleEcho(w, r, pay, rec)
}

func (s *Service) settleEcho(w http.ResponseWriter, r *http.Request, pay echoPayment, rec kv.EchoPayment) {
	m := s.echo
	// A client that hangs up must not leave a payment settled and not
	// refunded: the rest runs to completion on its own clock.
	ctx := context.WithoutCancel(r.Context())
	resp, _, err := s.engine.Settle(ctx, pay.body, "")
	if err != nil {
		_ = m.cfg.DB.ReleaseEchoPayment(rec.ID)
		s.problems.Write(w, r, err)
		return
	}
	respJSON, _ := json.Marshal(resp)
	rec.Settlement, rec.SettleTx, rec.UpdatedAt = string(respJSON), resp.Transaction, m.cfg.Now().UTC()
	if !resp.Success {
		if resp.ErrorReason == x402.ReasonSettlementPending {
			rec.State = kv.EchoPending
			if err := m.cfg.DB.UpdateEchoPayment(rec); err != nil {
				s.logger.Error("record echo payment", "err", err)
			}
		} else if err := m.cfg.DB.ReleaseEchoPayment(rec.ID); err != nil {
			s.logger.Error("release echo payment", "err", err)
		}
		msg := resp.ErrorReason
		if resp.ErrorMessage != "" {
			msg += ": " + resp.ErrorMessage
		}
		s.writePaymentRequired(w, msg, &resp, pay.version)
		return
	}
	rec.State = kv.EchoSettled
	if err := m.cfg.DB.UpdateEchoPayment(rec); err != nil {
		s.logger.Error("record echo settlement", "err", err, "tx", resp.Transaction)
	}
	m.refundMu.Lock()
	rctx, cancel := context.WithTimeout(ctx, echoRefundTimeout)
	hash, err := m.cfg.Chain.SendToken(rctx, m.cfg.WalletKey, common.HexToAddress(pay.payer), m.amount)
	cancel()
	m.refundMu.Unlock()
	m.invalidateGas()
	rec.RefundTx, rec.UpdatedAt, rec.State = hash, m.cfg.Now().UTC(), kv.EchoRefunded
	if err != nil {
		rec.State, rec.RefundError = kv.EchoRefundFailed, err.Error()
		s.logger.Error("echo refund failed", "err", err, "payer", pay.payer, "settlement", resp.Transaction, "refund_tx", hash)
	}
	if err := m.cfg.DB.UpdateEchoPayment(rec); err != nil {
		s.logger.Error("record echo refund", "err", err, "refund_tx", hash)
	}
	s.writeEchoPaid(w, r, pay, rec, false)
}

// writeEchoPaid answers 200 for a settled echo payment.
func (s *Service) writeEchoPaid(w http.ResponseWriter, r *http.Request, pay echoPayment, rec kv.EchoPayment, replayed bool) {
	var resp x402.SettleResponse
	if err := json.Unmarshal([]byte(rec.Settlement), &resp); err != nil {
		s.problems.Write(w, r, fmt.Errorf("echo payment %s: recorded settlement: %w", rec.ID, err))
		return
	}
	hdr, err := x402.EncodeHeader(resp)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	if pay.version == x402.Version1 {
		w.Header().Set(x402.HeaderXPaymentResponse, hdr)
	} else {
		w.Header().Set(x402.HeaderPaymentResponse, hdr)
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, EchoResponse{
		Echo: EchoRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, X402Version: pay.version},
		Paid: EchoPaid{
			Success: resp.Success, Network: resp.Network, Asset: s.echo.cfg.Chain.Asset(), Amount: rec.Amount,
			Payer: resp.Payer, Transaction: resp.Transaction, Replayed: replayed,
			Refund: EchoRefund{Status: rec.State, Transaction: rec.RefundTx, Amount: rec.Amount, Error: rec.RefundError},
		},
	})
}

// secondsToNextUTCDay is the Retry-After of a cap refusal.
func secondsToNextUTCDay(now time.Time) int {
	next := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return max(1, int(next.Sub(now).Seconds()+0.999))
}

// EchoNetworkName resolves the --echo-network value "dev" to the dev
// chain's CAIP-2 id and leaves any other name as given.
func EchoNetworkName(name, devID string) string {
	if strings.EqualFold(name, "dev") && devID != "" {
		return devID
	}
	return name
}
