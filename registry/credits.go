package registry

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/access/x402pay"
	"github.com/ardx-dev/ardx/web"
)

// PaymentsConfig says how the registry sells credits: as an x402 merchant
// paid through a facilitator it calls over HTTP.
type PaymentsConfig struct {
	// FacilitatorURL is the facilitator's base URL; empty sells no credits.
	FacilitatorURL string
	// Network is the network paid on (CAIP-2 id or v1 name); the asset and
	// its EIP-712 domain come from the facilitator's /supported.
	Network string
	// PayTo is the operator's address that receives the payments.
	PayTo string
	// CreditsPerDollar is the price; zero means access.DefaultCreditsPerDollar.
	CreditsPerDollar int64
}

// SetPayments (re)configures the sale of credits. ardx serve calls it once
// its built-in facilitator listens, since only then is its address known.
func (s *Service) SetPayments(p PaymentsConfig) error {
	c := &access.Credits{DB: s.db, PerDollar: p.CreditsPerDollar, Now: s.cfg.Now}
	if c.PerDollar <= 0 {
		c.PerDollar = access.DefaultCreditsPerDollar
	}
	if p.FacilitatorURL != "" {
		m := &x402pay.Merchant{FacilitatorURL: p.FacilitatorURL, Network: p.Network, PayTo: p.PayTo}
		if err := m.Validate(); err != nil {
			return errors.New("registry: payments: " + err.Error())
		}
		c.Merchant = m
	}
	s.credits.Store(c)
	return nil
}

// x402Terms is the body of GET /x402.
type x402Terms struct {
	Sells            string          `json:"sells"`
	Available        bool            `json:"available"`
	Reason           string          `json:"reason,omitempty"`
	CreditsPerDollar int64           `json:"creditsPerDollar"`
	Purchase         purchaseHow     `json:"purchase"`
	Monitoring       monitoringTerms `json:"monitoring"`
	Facilitator      string          `json:"facilitator,omitempty"`
	Network          string          `json:"network,omitempty"`
	Asset            string          `json:"asset,omitempty"`
	PayTo            string          `json:"payTo,omitempty"`
	// Example is the 402 terms of one month of monitoring, as POST
	// /credits would offer them.
	Example *x402pay.Requirements `json:"example,omitempty"`
}

type purchaseHow struct {
	Method  string   `json:"method"`
	Path    string   `json:"path"`
	Body    string   `json:"body"`
	Auth    string   `json:"auth"`
	Headers []string `json:"paymentHeaders"`
	Steps   []string `json:"steps"`
}

type monitoringTerms struct {
	TrialDays        int   `json:"trialDays"`
	CreditsPerPeriod int64 `json:"creditsPerPeriod"`
	PeriodDays       int   `json:"periodDays"`
}

// handleX402 handles "GET /x402": the registry's payment terms, JSON to a
// machine and HTML to a browser.
func (s *Service) handleX402(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var fe fieldErrors
	fe.onlyParams(r.URL.Query(), "GET /x402")
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	c := s.credits.Load()
	t := x402Terms{
		Sells: "credits", CreditsPerDollar: c.PerDollar,
		Purchase: purchaseHow{
			Method: "POST", Path: "/credits", Body: `{"credits": <integer>}`, Auth: "Authorization: Bearer <key> (POST /monitoring/start mints one)",
			Headers: []string{x402pay.HeaderPaymentSignature + " (x402 v2)", x402pay.HeaderXPayment + " (x402 v1)"},
			Steps: []string{
				"POST /credits with the key and the number of credits: 402 with the terms (PAYMENT-REQUIRED header, v1 body)",
				"sign an EIP-3009 authorization for those terms (any x402 client does this)",
				"send the same request again with PAYMENT-SIGNATURE: 200 with the balance and PAYMENT-RESPONSE",
			},
		},
		Monitoring: monitoringTerms{TrialDays: int(access.TrialLength.Hours() / 24), CreditsPerPeriod: access.PeriodCredits, PeriodDays: int(access.Period.Hours() / 24)},
	}
	if c.Merchant == nil {
		t.Reason = "this registry sells no credits: no facilitator is configured"
	} else {
		t.Facilitator, t.PayTo, t.Network = c.Merchant.FacilitatorURL, c.Merchant.PayTo, c.Merchant.Network
		o, err := c.Offer(r.Context(), s.cfg.PublicURL+"/credits", access.PeriodCredits)
		if err != nil {
			t.Reason = err.Error()
		} else {
			t.Available, t.Network, t.Asset, t.Example = true, o.V2.Network, o.V2.Asset, &o.V2
		}
	}
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "no-cache")
	if !web.WantsHTML(r) {
		web.WriteJSON(w, http.StatusOK, t)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "x402.html", t); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeHTMLPage(w, buf.Bytes())
}

// creditsResponse is the body of a paid POST /credits.
type creditsResponse struct {
	Credits     int64                  `json:"credits"`
	Balance     int64                  `json:"balance"`
	Replayed    bool                   `json:"replayed"`
	Transaction string                 `json:"transaction"`
	Settlement  x402pay.SettleResponse `json:"settlement"`
}

// maxCreditsPurchase bounds one purchase (10,000 dollars at the default price).
const maxCreditsPurchase = 10_000_000

// handleCreditsBuy handles "POST /credits": {credits}. An x402 resource:
// without a payment it answers 402 with the terms; with one it verifies and
// settles through the facilitator and credits the caller's account once
// per payment.
func (s *Service) handleCreditsBuy(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "the body", "credits")
	n, ok := rawInt(m["credits"])
	if !ok || n < 1 || n > maxCreditsPurchase {
		fe.add("credits", "is required: an integer from 1 to "+strconv.Itoa(maxCreditsPurchase))
	}
	c := s.credits.Load()
	if ok && n >= 1 {
		if _, err := c.Price(int64(n)); err != nil {
			fe.add("credits", "must cost a whole number of micro-dollars at "+strconv.FormatInt(c.PerDollar, 10)+" credits a dollar")
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	caller, ok := s.requireCaller(w, r, "credits are bought for a key's account")
	if !ok {
		return
	}
	if c.Merchant == nil {
		s.problems.Write(w, r, s.problems.New(web.SlugNotImplemented, "this registry sells no credits: its operator configured no facilitator (see GET /x402)"))
		return
	}
	offer, err := c.Offer(r.Context(), s.cfg.PublicURL+"/credits", int64(n))
	if err != nil {
		s.writePaymentError(w, r, err)
		return
	}
	pay, err := x402pay.DecodePayment(r, offer)
	if errors.Is(err, x402pay.ErrNoPayment) {
		x402pay.WritePaymentRequired(w, offer, "", nil)
		return
	}
	if err != nil {
		x402pay.WritePaymentRequired(w, offer, err.Error(), nil)
		return
	}
	out, err := c.Buy(r.Context(), caller.AccountID, int64(n), pay)
	if err != nil {
		s.writePaymentError(w, r, err)
		return
	}
	if out.Refused != "" {
		var settled *x402pay.SettleResponse
		if out.Settlement.ErrorReason != "" {
			settled = &out.Settlement
		}
		x402pay.WritePaymentRequired(w, offer, out.Refused, settled)
		return
	}
	// Paused monitorings of the account resume at once.
	if err := s.monitor.ResumeAccount(caller.AccountID); err != nil {
		s.log.Warn("resume monitoring after a purchase", "error", err)
	}
	bal, err := s.db.CreditBalance(caller.AccountID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	x402pay.WriteSettled(w, pay.Version, out.Settlement)
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, creditsResponse{Credits: out.Entry.Delta, Balance: bal, Replayed: out.Replayed,
		Transaction: out.Settlement.Transaction, Settlement: out.Settlement})
}

// writePaymentError maps the merchant's own failures: a facilitator that
// does not answer is 503 (nothing was charged), the rest 500.
func (s *Service) writePaymentError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, x402pay.ErrFacilitator) {
		w.Header().Set("Retry-After", "5")
		s.problems.Write(w, r, s.problems.New(web.SlugServiceUnavailable, "the payment facilitator cannot be reached now; nothing was charged, try again shortly"))
		return
	}
	s.writeError(w, r, err)
}
