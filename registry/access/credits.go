package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access/x402pay"
)

// Credit kinds in the ledger.
const (
	CreditPurchase   = "purchase"
	CreditMonitoring = "monitoring"
)

// DefaultCreditsPerDollar is the price of credits: 1,000 a dollar, so a
// month of monitoring (19,000 credits) costs 19 dollars.
const DefaultCreditsPerDollar = 1000

// Purchase limits: at least one dollar's worth isn't required, but a
// purchase must cost a whole number of micro-dollars and at most 10,000
// dollars, so a typo cannot ask a wallet for a fortune.
const maxPurchaseMicroUSD = 10_000 * 1_000_000

// Credits sells credits for x402 payments and keeps each account's ledger.
type Credits struct {
	DB       *kv.DB
	Merchant *x402pay.Merchant // nil: credits are not for sale
	// PerDollar is how many credits a dollar buys.
	PerDollar int64
	Now       func() time.Time
}

// ErrBadAmount is Price's error for a number of credits that cannot be
// sold (not positive, not a whole number of micro-dollars, too large).
var ErrBadAmount = errors.New("credits: amount cannot be sold")

// ErrNotForSale means no facilitator is configured.
var ErrNotForSale = errors.New("credits: this registry sells no credits (no facilitator configured)")

// Price returns the price of n credits in micro-dollars.
func (c *Credits) Price(n int64) (int64, error) {
	per := c.PerDollar
	if per <= 0 {
		per = DefaultCreditsPerDollar
	}
	if n <= 0 || n > maxPurchaseMicroUSD/1_000_000*per {
		return 0, ErrBadAmount
	}
	if (n*1_000_000)%per != 0 {
		return 0, fmt.Errorf("%w: %d credits is not a whole number of micro-dollars at %d credits a dollar", ErrBadAmount, n, per)
	}
	return n * 1_000_000 / per, nil
}

// Offer prices n credits at the resource's URL.
func (c *Credits) Offer(ctx context.Context, resourceURL string, n int64) (x402pay.Offer, error) {
	if c.Merchant == nil {
		return x402pay.Offer{}, ErrNotForSale
	}
	micro, err := c.Price(n)
	if err != nil {
		return x402pay.Offer{}, err
	}
	return c.Merchant.Offer(ctx, x402pay.Resource{
		URL:         resourceURL,
		Description: fmt.Sprintf("%d ardx registry credits", n),
		MimeType:    "application/json",
	}, micro)
}

// PurchaseDetail is the ledger detail of a purchase: the settlement.
type PurchaseDetail struct {
	Settlement x402pay.SettleResponse `json:"settlement"`
}

// PurchaseOutcome is what Buy did.
type PurchaseOutcome struct {
	// Entry is the ledger entry of the purchase (zero when not paid).
	Entry kv.CreditEntry
	// Settlement is the facilitator's answer (also for a replay).
	Settlement x402pay.SettleResponse
	// Replayed is true when the payment had already bought these credits.
	Replayed bool
	// Refused, when not empty, is why the payment did not pay: the client's
	// to fix (answer 402 again).
	Refused string
}

// Buy settles pay for n credits for account and credits them once: the
// payment's authorization is the ledger reference, so a payment sent
// again (a retry after a lost answer, or a replay) finds its entry and
// credits nothing more. The settle body is bound to the payment before the
// facilitator is asked, so a retry after a crash goes to /settle (which
// replays the recorded outcome) instead of /verify (which would call the
// spent authorization invalid).
func (c *Credits) Buy(ctx context.Context, account string, n int64, pay x402pay.Payment) (PurchaseOutcome, error) {
	if c.Merchant == nil {
		return PurchaseOutcome{}, ErrNotForSale
	}
	if owner, e, err := c.DB.CreditByRef(pay.Ref); !errors.Is(err, kv.ErrNotFound) {
		if err != nil {
			return PurchaseOutcome{}, err
		}
		if owner != account {
			return PurchaseOutcome{Refused: "this payment already bought credits for another account"}, nil
		}
		var d PurchaseDetail
		_ = json.Unmarshal(e.Detail, &d)
		return PurchaseOutcome{Entry: e, Settlement: d.Settlement, Replayed: true}, nil
	}
	sum := sha256.Sum256(pay.Body)
	bodyHash := hex.EncodeToString(sum[:])
	bound, made, err := c.DB.BindCreditIntent(pay.Ref, kv.CreditIntent{Account: account, BodyHash: bodyHash, CreatedAt: c.now(), Body: pay.Body, Credits: n})
	if err != nil {
		return PurchaseOutcome{}, err
	}
	switch {
	case bound.Account != account:
		return PurchaseOutcome{Refused: "this payment was already sent by another account"}, nil
	case bound.BodyHash != bodyHash:
		return PurchaseOutcome{Refused: "this authorization was already sent for other terms"}, nil
	case made:
		// A retry skips /verify: its authorization may be spent already by
		// the first attempt, and /settle verifies again anyway.
		v, err := c.Merchant.Verify(ctx, pay)
		if err != nil {
			return PurchaseOutcome{}, err
		}
		if !v.IsValid {
			// Nothing was sent to the chain; a retry of the same payment
			// (funded since, say) goes to /settle, which verifies again.
			if err := c.DB.FinishCreditIntent(pay.Ref); err != nil {
				return PurchaseOutcome{}, err
			}
			return PurchaseOutcome{Refused: reason(v.InvalidReason, v.InvalidMessage)}, nil
		}
	}
	s, err := c.Merchant.Settle(ctx, pay)
	if err != nil {
		return PurchaseOutcome{}, err
	}
	if !s.Success {
		if s.ErrorReason != settlementPending {
			if err := c.DB.FinishCreditIntent(pay.Ref); err != nil {
				return PurchaseOutcome{}, err
			}
		}
		return PurchaseOutcome{Settlement: s, Refused: reason(s.ErrorReason, s.ErrorMessage)}, nil
	}
	e, applied, err := c.credit(account, n, pay.Ref, s)
	if err != nil {
		return PurchaseOutcome{}, err
	}
	return PurchaseOutcome{Entry: e, Settlement: s, Replayed: !applied}, nil
}

// settlementPending is the facilitator's reason for a settlement that is
// not final yet: the same body is to be sent again later.
const settlementPending = "settlement_pending"

// credit applies a settled purchase to the ledger once and marks its
// intent done.
func (c *Credits) credit(account string, n int64, ref string, s x402pay.SettleResponse) (kv.CreditEntry, bool, error) {
	detail, _ := json.Marshal(PurchaseDetail{Settlement: s})
	e, applied, err := c.DB.ApplyCredit(account, kv.CreditEntry{
		Time: c.now(), Delta: n, Kind: CreditPurchase, Ref: ref, Detail: detail,
	})
	if err != nil {
		return e, applied, err
	}
	return e, applied, c.DB.FinishCreditIntent(ref)
}

// reconcileAfter is how old an intent must be before Reconcile settles it:
// younger ones may still be in the buyer's own request.
const reconcileAfter = 30 * time.Second

// Reconcile finishes purchases whose buyer never got a final answer (the
// facilitator said settlement_pending, the answer was lost, the registry
// stopped): it sends each pending intent's settle body again, which the
// facilitator answers with the recorded outcome, and credits a success
// once. It returns the accounts it credited; a facilitator that cannot be
// reached ends the round without error (the next round tries again).
func (c *Credits) Reconcile(ctx context.Context) ([]string, error) {
	if c.Merchant == nil {
		return nil, nil
	}
	pending, err := c.DB.PendingCreditIntents(c.now().Add(-reconcileAfter), 100)
	if err != nil {
		return nil, err
	}
	var credited []string
	for _, in := range pending {
		if _, _, err := c.DB.CreditByRef(in.Ref); err == nil || len(in.Body) == 0 || in.Credits <= 0 {
			// Credited already, or bound before intents kept their body.
			if err := c.DB.FinishCreditIntent(in.Ref); err != nil {
				return credited, err
			}
			continue
		}
		s, err := c.Merchant.Settle(ctx, x402pay.Payment{Body: in.Body, Ref: in.Ref})
		if errors.Is(err, x402pay.ErrFacilitator) {
			return credited, nil
		}
		if err != nil {
			return credited, err
		}
		switch {
		case s.Success:
			if _, applied, err := c.credit(in.Account, in.Credits, in.Ref, s); err != nil {
				return credited, err
			} else if applied {
				credited = append(credited, in.Account)
			}
		case s.ErrorReason != settlementPending:
			if err := c.DB.FinishCreditIntent(in.Ref); err != nil {
				return credited, err
			}
		}
	}
	return credited, nil
}

func (c *Credits) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func reason(code, msg string) string {
	switch {
	case code == "":
		return msg
	case msg == "":
		return code
	}
	return code + ": " + msg
}
