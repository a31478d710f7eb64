// Package x402pay is the registry's side of an x402 payment: a merchant
// that answers 402 with terms, reads the client's signed payment from its
// header, and calls a facilitator's /verify and /settle over HTTP, as any
// x402 resource server does. It imports nothing of the facilitator: the
// wire shapes here are the protocol's (x402 v1 and v2, exact scheme, EVM),
// written from the specification.
package x402pay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Header names of x402 between client and merchant.
const (
	HeaderPaymentSignature = "PAYMENT-SIGNATURE"  // v2 payload, client → merchant
	HeaderXPayment         = "X-PAYMENT"          // v1 payload, client → merchant
	HeaderPaymentRequired  = "PAYMENT-REQUIRED"   // v2 terms on a 402
	HeaderPaymentResponse  = "PAYMENT-RESPONSE"   // v2 settlement, merchant → client
	HeaderXPaymentResponse = "X-PAYMENT-RESPONSE" // v1 settlement
)

// maxHeaderLen bounds a payment header; a payload with a long smart-wallet
// signature stays far below it.
const maxHeaderLen = 32 << 10

// maxFacilitatorBody bounds what we read of a facilitator's answer.
const maxFacilitatorBody = 64 << 10

// Extra is the EIP-712 domain of the asset, which the payer signs over.
type Extra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Requirements is one v2 "accepts" element, and a v2 payload's "accepted".
type Requirements struct {
	Scheme            string `json:"scheme"`
	Network           string `json:"network"`
	Amount            string `json:"amount"`
	Asset             string `json:"asset"`
	PayTo             string `json:"payTo"`
	MaxTimeoutSeconds int    `json:"maxTimeoutSeconds"`
	Extra             *Extra `json:"extra,omitempty"`
}

// RequirementsV1 is one v1 "accepts" element.
type RequirementsV1 struct {
	Scheme            string          `json:"scheme"`
	Network           string          `json:"network"`
	MaxAmountRequired string          `json:"maxAmountRequired"`
	Resource          string          `json:"resource"`
	Description       string          `json:"description"`
	MimeType          string          `json:"mimeType,omitempty"`
	OutputSchema      json.RawMessage `json:"outputSchema,omitempty"`
	PayTo             string          `json:"payTo"`
	MaxTimeoutSeconds int             `json:"maxTimeoutSeconds"`
	Asset             string          `json:"asset"`
	Extra             *Extra          `json:"extra,omitempty"`
}

// Resource describes the paid resource (v2).
type Resource struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// PaymentRequired is the decoded PAYMENT-REQUIRED header of a v2 402.
type PaymentRequired struct {
	X402Version int                        `json:"x402Version"`
	Error       string                     `json:"error,omitempty"`
	Resource    *Resource                  `json:"resource,omitempty"`
	Accepts     []Requirements             `json:"accepts"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// PaymentRequiredV1 is the JSON body of a 402 (v1 reads it; v2 the header).
type PaymentRequiredV1 struct {
	X402Version int              `json:"x402Version"`
	Error       string           `json:"error"`
	Accepts     []RequirementsV1 `json:"accepts"`
}

// Authorization is the EIP-3009 message the payer signed.
type Authorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

// ExactPayload is the exact EVM scheme's signed payload.
type ExactPayload struct {
	Signature     string         `json:"signature"`
	Authorization *Authorization `json:"authorization"`
}

// PayloadV2 is what a v2 client sends in PAYMENT-SIGNATURE.
type PayloadV2 struct {
	X402Version int                        `json:"x402Version"`
	Resource    *Resource                  `json:"resource,omitempty"`
	Accepted    Requirements               `json:"accepted"`
	Payload     ExactPayload               `json:"payload"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// PayloadV1 is what a v1 client sends in X-PAYMENT.
type PayloadV1 struct {
	X402Version int          `json:"x402Version"`
	Scheme      string       `json:"scheme"`
	Network     string       `json:"network"`
	Payload     ExactPayload `json:"payload"`
}

// VerifyResponse is a facilitator's /verify answer.
type VerifyResponse struct {
	IsValid        bool   `json:"isValid"`
	InvalidReason  string `json:"invalidReason,omitempty"`
	InvalidMessage string `json:"invalidMessage,omitempty"`
	Payer          string `json:"payer,omitempty"`
}

// SettleResponse is a facilitator's /settle answer and the decoded
// PAYMENT-RESPONSE header.
type SettleResponse struct {
	Success      bool   `json:"success"`
	ErrorReason  string `json:"errorReason,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Payer        string `json:"payer,omitempty"`
	Transaction  string `json:"transaction"`
	Network      string `json:"network"`
	Amount       string `json:"amount,omitempty"`
}

// Network is what the merchant needs of a network to price in its asset:
// read from the facilitator's /supported.
type Network struct {
	ID       string // CAIP-2
	V1Name   string // "" when the network has no v1 name
	Asset    string
	Name     string // EIP-712 domain name
	Version  string // EIP-712 domain version
	Decimals int
}

// Offer is one priced resource: the terms in both versions.
type Offer struct {
	Resource Resource
	V2       Requirements
	V1       *RequirementsV1 // nil when the network has no v1 name
}

// Payment is a client's decoded payment for an offer.
type Payment struct {
	Version int
	// Body is the /verify and /settle request body.
	Body []byte
	// Ref identifies the payment (network, asset, payer and EIP-3009 nonce):
	// the same authorization sent twice has the same Ref.
	Ref   string
	Payer string
	Value string
}

// Errors of the merchant. ErrNoPayment and ErrBadPayment are the client's
// (answer 402 again); ErrFacilitator is ours (503).
var (
	ErrNoPayment   = errors.New("x402pay: no payment header")
	ErrBadPayment  = errors.New("x402pay: unusable payment")
	ErrFacilitator = errors.New("x402pay: facilitator unavailable")
)

// Merchant prices resources on one network and pays to one address through
// one facilitator.
type Merchant struct {
	// FacilitatorURL is the facilitator's base URL (POST <url>/verify, /settle).
	FacilitatorURL string
	// Network names the network to be paid on, by CAIP-2 id or v1 name.
	Network string
	// PayTo receives the payments.
	PayTo string
	// MaxTimeoutSeconds is how long a signed payment stays valid; 0 means 300.
	MaxTimeoutSeconds int
	// Client calls the facilitator; nil means one with a 35 s timeout
	// (a settlement answers within about 25 s).
	Client *http.Client

	mu      sync.Mutex
	network *Network
	fetched time.Time
}

var addressRE = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)

// Validate checks the configuration without calling anyone.
func (m *Merchant) Validate() error {
	if !strings.HasPrefix(m.FacilitatorURL, "http://") && !strings.HasPrefix(m.FacilitatorURL, "https://") {
		return fmt.Errorf("facilitator URL %q must be an http(s) URL", m.FacilitatorURL)
	}
	if !addressRE.MatchString(m.PayTo) {
		return fmt.Errorf("payTo %q must be a 0x address", m.PayTo)
	}
	if m.Network == "" {
		return errors.New("a network is required")
	}
	return nil
}

func (m *Merchant) client() *http.Client {
	if m.Client != nil {
		return m.Client
	}
	return &http.Client{Timeout: 35 * time.Second}
}

func (m *Merchant) base() string { return strings.TrimRight(m.FacilitatorURL, "/") }

// supportedTTL is how long the facilitator's network facts are reused.
const supportedTTL = time.Minute

// NetworkFacts returns the network's asset and EIP-712 domain from the
// facilitator's GET /supported, cached for a minute. A network the
// facilitator does not list as available is ErrFacilitator.
func (m *Merchant) NetworkFacts(ctx context.Context) (Network, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.network != nil && time.Since(m.fetched) < supportedTTL {
		return *m.network, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base()+"/supported", nil)
	if err != nil {
		return Network{}, fmt.Errorf("%w: %v", ErrFacilitator, err)
	}
	var sup struct {
		Networks map[string]struct {
			Available bool   `json:"available"`
			Network   string `json:"network"`
			V1Network string `json:"v1Network"`
			Asset     string `json:"asset"`
			Decimals  int    `json:"decimals"`
			EIP712    Extra  `json:"eip712"`
		} `json:"networks"`
	}
	if err := m.call(req, &sup); err != nil {
		return Network{}, err
	}
	for id, n := range sup.Networks {
		if id != m.Network && n.V1Network != m.Network {
			continue
		}
		if !n.Available {
			return Network{}, fmt.Errorf("%w: network %s cannot settle now", ErrFacilitator, m.Network)
		}
		if !addressRE.MatchString(n.Asset) || n.Decimals <= 0 || n.Decimals > 18 {
			return Network{}, fmt.Errorf("%w: /supported gives no usable asset for %s", ErrFacilitator, m.Network)
		}
		m.network = &Network{ID: id, V1Name: n.V1Network, Asset: n.Asset, Name: n.EIP712.Name, Version: n.EIP712.Version, Decimals: n.Decimals}
		m.fetched = time.Now()
		return *m.network, nil
	}
	return Network{}, fmt.Errorf("%w: the facilitator does not serve network %s", ErrFacilitator, m.Network)
}

// Offer prices a resource at micro-dollars (1e-6 USD; USDC's unit at 6
// decimals) on the merchant's network.
func (m *Merchant) Offer(ctx context.Context, res Resource, microUSD int64) (Offer, error) {
	n, err := m.NetworkFacts(ctx)
	if err != nil {
		return Offer{}, err
	}
	amount := new(big.Int).SetInt64(microUSD)
	if n.Decimals > 6 {
		amount.Mul(amount, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Decimals-6)), nil))
	} else if n.Decimals < 6 {
		amount.Quo(amount, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-n.Decimals)), nil))
	}
	timeout := m.MaxTimeoutSeconds
	if timeout <= 0 {
		timeout = 300
	}
	extra := &Extra{Name: n.Name, Version: n.Version}
	o := Offer{Resource: res, V2: Requirements{
		Scheme: "exact", Network: n.ID, Amount: amount.String(), Asset: n.Asset,
		PayTo: m.PayTo, MaxTimeoutSeconds: timeout, Extra: extra,
	}}
	if n.V1Name != "" {
		o.V1 = &RequirementsV1{
			Scheme: "exact", Network: n.V1Name, MaxAmountRequired: amount.String(),
			Resource: res.URL, Description: res.Description, MimeType: res.MimeType,
			PayTo: m.PayTo, MaxTimeoutSeconds: timeout, Asset: n.Asset, Extra: extra,
		}
	}
	return o, nil
}

// WritePaymentRequired answers 402 with o's terms: the v2 PAYMENT-REQUIRED
// header and the v1 body, as the official servers of both versions do.
// settled, when not nil, is a failed settlement to hand back.
func WritePaymentRequired(w http.ResponseWriter, o Offer, reason string, settled *SettleResponse) {
	v2Err, v1Err := reason, reason
	if reason == "" {
		v2Err, v1Err = "PAYMENT-SIGNATURE header is required", "X-PAYMENT header is required"
	}
	res := o.Resource
	pr := PaymentRequired{X402Version: 2, Error: v2Err, Resource: &res, Accepts: []Requirements{o.V2}}
	if h, err := encodeHeader(pr); err == nil {
		w.Header().Set(HeaderPaymentRequired, h)
	}
	if settled != nil {
		if h, err := encodeHeader(settled); err == nil {
			w.Header().Set(HeaderPaymentResponse, h)
		}
	}
	body := PaymentRequiredV1{X402Version: 1, Error: v1Err, Accepts: []RequirementsV1{}}
	if o.V1 != nil {
		body.Accepts = append(body.Accepts, *o.V1)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Access-Control-Expose-Headers", HeaderPaymentRequired+", "+HeaderPaymentResponse+", "+HeaderXPaymentResponse)
	w.WriteHeader(http.StatusPaymentRequired)
	_ = json.NewEncoder(w).Encode(body)
}

// WriteSettled sets the settlement header of a paid answer (v1 or v2 name).
func WriteSettled(w http.ResponseWriter, version int, s SettleResponse) {
	h, err := encodeHeader(s)
	if err != nil {
		return
	}
	name := HeaderPaymentResponse
	if version == 1 {
		name = HeaderXPaymentResponse
	}
	w.Header().Set(name, h)
	w.Header().Add("Access-Control-Expose-Headers", name)
}

// DecodePayment reads the payment of r for o: PAYMENT-SIGNATURE (v2) or
// X-PAYMENT (v1), strictly: one header, base64 of one JSON object with no
// unknown members, accepting exactly o's terms, an EIP-3009 authorization
// to o's payTo for o's amount. It returns ErrNoPayment without a header and
// an error wrapping ErrBadPayment for anything else amiss.
func DecodePayment(r *http.Request, o Offer) (Payment, error) {
	v2, v1 := r.Header.Values(HeaderPaymentSignature), r.Header.Values(HeaderXPayment)
	switch {
	case len(v2) == 0 && len(v1) == 0:
		return Payment{}, ErrNoPayment
	case len(v2)+len(v1) > 1:
		return Payment{}, fmt.Errorf("%w: send one payment header", ErrBadPayment)
	case len(v2) == 1:
		return decodeV2(v2[0], o)
	}
	return decodeV1(v1[0], o)
}

func decodeV2(value string, o Offer) (Payment, error) {
	var p PayloadV2
	if err := decodeHeader(value, &p); err != nil {
		return Payment{}, fmt.Errorf("%w: PAYMENT-SIGNATURE: %v", ErrBadPayment, err)
	}
	if p.X402Version != 2 {
		return Payment{}, fmt.Errorf("%w: PAYMENT-SIGNATURE carries x402Version %d, want 2", ErrBadPayment, p.X402Version)
	}
	if !sameTerms(p.Accepted, o.V2) {
		return Payment{}, fmt.Errorf("%w: the payment accepts other terms than this offer's", ErrBadPayment)
	}
	if err := checkAuthorization(p.Payload, o.V2.PayTo, o.V2.Amount); err != nil {
		return Payment{}, err
	}
	body, err := json.Marshal(struct {
		X402Version         int          `json:"x402Version"`
		PaymentPayload      PayloadV2    `json:"paymentPayload"`
		PaymentRequirements Requirements `json:"paymentRequirements"`
	}{2, p, o.V2})
	if err != nil {
		return Payment{}, err
	}
	a := p.Payload.Authorization
	return Payment{Version: 2, Body: body, Payer: a.From, Value: a.Value, Ref: paymentRef(o.V2.Network, o.V2.Asset, a)}, nil
}

func decodeV1(value string, o Offer) (Payment, error) {
	if o.V1 == nil {
		return Payment{}, fmt.Errorf("%w: this network has no x402 v1 name; pay with PAYMENT-SIGNATURE (v2)", ErrBadPayment)
	}
	var p PayloadV1
	if err := decodeHeader(value, &p); err != nil {
		return Payment{}, fmt.Errorf("%w: X-PAYMENT: %v", ErrBadPayment, err)
	}
	if p.X402Version != 1 || p.Scheme != "exact" || p.Network != o.V1.Network {
		return Payment{}, fmt.Errorf("%w: X-PAYMENT must be x402Version 1, scheme exact, network %s", ErrBadPayment, o.V1.Network)
	}
	if err := checkAuthorization(p.Payload, o.V1.PayTo, o.V1.MaxAmountRequired); err != nil {
		return Payment{}, err
	}
	body, err := json.Marshal(struct {
		X402Version         int            `json:"x402Version"`
		PaymentPayload      PayloadV1      `json:"paymentPayload"`
		PaymentRequirements RequirementsV1 `json:"paymentRequirements"`
	}{1, p, *o.V1})
	if err != nil {
		return Payment{}, err
	}
	a := p.Payload.Authorization
	return Payment{Version: 1, Body: body, Payer: a.From, Value: a.Value, Ref: paymentRef(o.V2.Network, o.V2.Asset, a)}, nil
}

var (
	nonceRE   = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)
	sigRE     = regexp.MustCompile(`^0x[0-9a-fA-F]{130,}$`)
	decimalRE = regexp.MustCompile(`^[0-9]{1,78}$`)
)

// checkAuthorization refuses a payload that cannot pay the offer, before
// the facilitator is asked: the facilitator checks the signature and the
// chain, this checks that what was signed is what we asked for.
func checkAuthorization(p ExactPayload, payTo, amount string) error {
	a := p.Authorization
	switch {
	case a == nil:
		return fmt.Errorf("%w: the payload has no EIP-3009 authorization", ErrBadPayment)
	case !sigRE.MatchString(p.Signature) || len(p.Signature) > 4096:
		return fmt.Errorf("%w: signature must be 0x hex", ErrBadPayment)
	case !addressRE.MatchString(a.From) || !addressRE.MatchString(a.To):
		return fmt.Errorf("%w: from and to must be 0x addresses", ErrBadPayment)
	case !strings.EqualFold(a.To, payTo):
		return fmt.Errorf("%w: the authorization pays %s, not %s", ErrBadPayment, a.To, payTo)
	case a.Value != amount:
		return fmt.Errorf("%w: the authorization moves %s, the price is %s", ErrBadPayment, a.Value, amount)
	case !nonceRE.MatchString(a.Nonce):
		return fmt.Errorf("%w: nonce must be 32 bytes of 0x hex", ErrBadPayment)
	case !decimalRE.MatchString(a.ValidAfter) || !decimalRE.MatchString(a.ValidBefore):
		return fmt.Errorf("%w: validAfter and validBefore must be decimal strings", ErrBadPayment)
	}
	return nil
}

func sameTerms(a, b Requirements) bool {
	return a.Scheme == b.Scheme && a.Network == b.Network && a.Amount == b.Amount &&
		strings.EqualFold(a.Asset, b.Asset) && strings.EqualFold(a.PayTo, b.PayTo) &&
		a.MaxTimeoutSeconds == b.MaxTimeoutSeconds && a.Extra != nil && b.Extra != nil && *a.Extra == *b.Extra
}

func paymentRef(network, asset string, a *Authorization) string {
	return strings.ToLower("x402:" + network + ":" + asset + ":" + a.From + ":" + a.Nonce)
}

// Verify calls the facilitator's POST /verify with p's body.
func (m *Merchant) Verify(ctx context.Context, p Payment) (VerifyResponse, error) {
	var v VerifyResponse
	err := m.post(ctx, "/verify", p.Body, 10*time.Second, &v)
	return v, err
}

// Settle calls the facilitator's POST /settle with p's body. The
// facilitator settles one body once, so calling it again for the same
// payment returns the recorded outcome.
func (m *Merchant) Settle(ctx context.Context, p Payment) (SettleResponse, error) {
	var s SettleResponse
	err := m.post(ctx, "/settle", p.Body, 35*time.Second, &s)
	return s, err
}

func (m *Merchant) post(ctx context.Context, path string, body []byte, timeout time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base()+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFacilitator, err)
	}
	req.Header.Set("Content-Type", "application/json")
	return m.call(req, out)
}

// call does req and decodes a JSON answer of at most maxFacilitatorBody
// bytes. /verify and /settle keep their shapes on every status, so any
// status with a decodable body is an answer; a 5xx without one is
// ErrFacilitator.
func (m *Merchant) call(req *http.Request, out any) error {
	resp, err := m.client().Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFacilitator, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxFacilitatorBody+1))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFacilitator, err)
	}
	if len(b) > maxFacilitatorBody {
		return fmt.Errorf("%w: answer over %d bytes", ErrFacilitator, maxFacilitatorBody)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %s %s answered %d without JSON", ErrFacilitator, req.Method, req.URL.Path, resp.StatusCode)
	}
	return nil
}

func encodeHeader(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// decodeHeader decodes base64 (standard or URL alphabet, padded or not) of
// one JSON object into v, refusing unknown members and trailing data.
func decodeHeader(value string, v any) error {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxHeaderLen {
		return fmt.Errorf("empty or over %d bytes", maxHeaderLen)
	}
	s := strings.TrimRight(value, "=")
	var b []byte
	var err error
	if strings.ContainsAny(s, "-_") {
		b, err = base64.RawURLEncoding.DecodeString(s)
	} else {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return errors.New("not base64")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("JSON: %v", err)
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	if bytes.TrimSpace(b)[0] != '{' {
		return errors.New("not a JSON object")
	}
	return nil
}
