package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// ErrPaymentIDConflict is returned by SettlePurchase when the payment id was
// first used for a purchase with other terms (HTTP 409, as the
// payment-identifier extension says).
var ErrPaymentIDConflict = errors.New("settle: payment id already used for a purchase with other terms")

// SettlePurchase is Settle under the x402 payment-identifier extension:
// paymentID names one purchase, whose terms fingerprint identifies
// (x402.PaymentRequest.PurchaseFingerprint). The official client signs a
// fresh authorization for every 402, so a retry after a lost answer is a
// new body that no per-body or per-nonce rule recognises; the id does.
//
// The id is looked up before anything is verified. Bound to other terms:
// ErrPaymentIDConflict. Bound to this body, or new: the body is settled as
// Settle does. Bound to another body of the same purchase: that body's
// settlement answers (recorded, or waited for while in flight), marked
// replayed once final, and this body moves nothing; unless that settlement
// failed, in which case nothing was bought and this body takes the id over.
func (e *Engine) SettlePurchase(ctx context.Context, body []byte, idempotencyKey, paymentID, fingerprint string) (resp x402.SettleResponse, replayed bool, err error) {
	bodyKey, err := BodyKey(body)
	if err != nil {
		return invalidPayload("", "body is not JSON: "+err.Error()), false, nil
	}
	mine := kv.PaymentIDBinding{Fingerprint: fingerprint, BodyKey: bodyKey, Body: body, CreatedAt: e.opts.Now()}
	replace := ""
	for {
		bound, err := e.db.BindPaymentID(paymentID, mine, replace, e.opts.IdempotencyKeyTTL)
		if err != nil {
			return x402.SettleResponse{}, false, fmt.Errorf("settle: bind payment id: %w", err)
		}
		switch {
		case bound.Fingerprint != fingerprint:
			return x402.SettleResponse{}, false, ErrPaymentIDConflict
		case bound.BodyKey == bodyKey:
			return e.Settle(ctx, body, idempotencyKey)
		}
		rec, err := e.db.Settlement(bound.BodyKey)
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return x402.SettleResponse{}, false, fmt.Errorf("settle: read record: %w", err)
		}
		if err == nil && rec.State == kv.SettlementFailed {
			// The first attempt bought nothing: this body may, once it
			// holds the id (another retry may have taken it meanwhile).
			replace = bound.BodyKey
			continue
		}
		// Succeeded, or still in flight: the purchase is that body's.
		resp, _, err := e.Settle(ctx, bound.Body, "")
		final := err == nil && resp.ErrorReason != x402.ReasonSettlementPending
		return resp, final, err
	}
}
