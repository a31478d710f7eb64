package facilitator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/web"
)

// Reason codes this package emits itself, for failures that happen before
// the engine sees the payment. The spec reserves invalid_* for what the payer
// can act on; rate limiting and internal errors belong to the facilitator.
const (
	reasonTooManyRequests = "too_many_requests"
	reasonVerifyInternal  = "unexpected_verify_error"
	reasonSettleInternal  = "unexpected_settle_error"
	// reasonIdempotencyKeyConflict: the merchant reused an Idempotency-Key
	// with another body (the 422); the payer can do nothing about it.
	reasonIdempotencyKeyConflict = "idempotency_key_conflict"
	// reasonPaymentIDConflict: a payment-identifier id was reused for a
	// purchase with other terms (the 409).
	reasonPaymentIDConflict = "payment_identifier_conflict"
)

// MaxIdempotencyKeyLen bounds the Idempotency-Key header; the key is stored,
// so it must not be an unbounded client-controlled string.
const MaxIdempotencyKeyLen = 255

// paymentShape says which response body a payment path keeps on failure.
type paymentShape int

const (
	verifyShape paymentShape = iota + 1
	settleShape
)

// paymentShapeOf names the payment shape of the request's route, if any:
// POST /verify and POST /settle answer in it on every status.
func paymentShapeOf(r *http.Request) (paymentShape, bool) {
	if r.Method != http.MethodPost {
		return 0, false
	}
	switch r.URL.Path {
	case "/verify":
		return verifyShape, true
	case "/settle":
		return settleShape, true
	}
	return 0, false
}

// writePaymentFailure writes a failed verify or settle response with status.
// Settle failures carry transaction "" and network "" when nothing is known.
func writePaymentFailure(w http.ResponseWriter, shape paymentShape, status int, reason, msg string) {
	writePaymentFailureFor(w, shape, status, reason, msg, peek{})
}

// writePaymentFailureFor is writePaymentFailure echoing what could be read
// of the body, so even a refused request tells the merchant which network
// and payer it was about.
func writePaymentFailureFor(w http.ResponseWriter, shape paymentShape, status int, reason, msg string, pk peek) {
	w.Header().Set("Cache-Control", "no-store")
	switch shape {
	case verifyShape:
		web.WriteJSON(w, status, x402.VerifyResponse{IsValid: false, InvalidReason: reason, InvalidMessage: msg, Payer: pk.payer()})
	default:
		web.WriteJSON(w, status, x402.SettleResponse{Success: false, ErrorReason: reason, ErrorMessage: msg,
			Payer: pk.payer(), Network: pk.network()})
	}
}

// peek is the little of a payment request worth echoing in a failure. It is
// read leniently from bodies DecodeRequest refused; every member may be
// missing or of the wrong type.
type peek struct {
	PaymentPayload struct {
		Network  any `json:"network"`
		Accepted struct {
			Network any `json:"network"`
		} `json:"accepted"`
		Payload struct {
			Authorization struct {
				From any `json:"from"`
			} `json:"authorization"`
		} `json:"payload"`
	} `json:"paymentPayload"`
	PaymentRequirements struct {
		Network any `json:"network"`
	} `json:"paymentRequirements"`
}

func peekBody(body []byte) peek {
	var pk peek
	_ = json.Unmarshal(body, &pk) // partial results are what we want
	return pk
}

func (pk peek) network() string {
	for _, v := range []any{pk.PaymentPayload.Accepted.Network, pk.PaymentPayload.Network, pk.PaymentRequirements.Network} {
		if s, ok := v.(string); ok && s != "" && len(s) <= 64 {
			return s
		}
	}
	return ""
}

func (pk peek) payer() string {
	if s, ok := pk.PaymentPayload.Payload.Authorization.From.(string); ok && common.IsHexAddress(s) {
		return s
	}
	return ""
}

// paymentRoute gives a payment handler its own last-resort recover, so even
// a panic answers in the payment shape rather than as a problem document.
func (s *Service) paymentRoute(shape paymentShape, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.Error("panic in payment handler", "panic", v, "path", r.URL.Path,
					"request_id", web.RequestID(r.Context()))
				writePaymentFailure(w, shape, http.StatusInternalServerError, internalReason(shape),
					"the facilitator failed to handle the request; retry with backoff")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func internalReason(shape paymentShape) string {
	if shape == verifyShape {
		return reasonVerifyInternal
	}
	return reasonSettleInternal
}

// readPayment reads and decodes a payment request body. On failure it has
// already answered (413 or 400, invalid_payload, in the route's shape).
func (s *Service) readPayment(w http.ResponseWriter, r *http.Request, shape paymentShape) ([]byte, *x402.PaymentRequest, bool) {
	body, err := web.ReadBody(w, r, MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writePaymentFailure(w, shape, http.StatusRequestEntityTooLarge, x402.ReasonInvalidPayload,
				fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes))
			return nil, nil, false
		}
		writePaymentFailure(w, shape, http.StatusBadRequest, x402.ReasonInvalidPayload,
			"the request body could not be read: "+err.Error())
		return nil, nil, false
	}
	req, err := x402.DecodeRequest(body)
	if err != nil {
		writePaymentFailureFor(w, shape, http.StatusBadRequest, x402.ReasonInvalidPayload, err.Error(), peekBody(body))
		return nil, nil, false
	}
	return body, req, true
}

// handleVerify handles "POST /verify". Every decodable request answers 200:
// an invalid payment is an outcome, not an HTTP error (the official e2e
// facilitator protocol and its clients expect 200 with isValid false).
func (s *Service) handleVerify(w http.ResponseWriter, r *http.Request) {
	_, req, ok := s.readPayment(w, r, verifyShape)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.VerifyTimeout)
	defer cancel()
	resp := s.engine.Verify(ctx, req)
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, resp)
}

// handleSettle handles "POST /settle". The engine settles each canonical
// body at most once, and each payment-identifier id at most once; a replay
// is marked with Idempotency-Replayed: true. An Idempotency-Key reused with
// a different body (422) and a payment id reused for other terms (409) are
// answered as problems that are also failed settle responses.
func (s *Service) handleSettle(w http.ResponseWriter, r *http.Request) {
	body, req, ok := s.readPayment(w, r, settleShape)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > MaxIdempotencyKeyLen {
		writePaymentFailure(w, settleShape, http.StatusBadRequest, x402.ReasonInvalidPayload,
			fmt.Sprintf("the Idempotency-Key header is longer than %d bytes", MaxIdempotencyKeyLen))
		return
	}
	// A merchant that hangs up must not abandon a settlement half-way: the
	// engine bounds its own wait (about 25 s) and records the outcome.
	ctx := context.WithoutCancel(r.Context())
	var (
		resp     x402.SettleResponse
		replayed bool
		err      error
	)
	if req.PaymentID != "" {
		// The payment-identifier extension: one purchase per id, whatever
		// authorization a retry carries.
		resp, replayed, err = s.engine.SettlePurchase(ctx, body, key, req.PaymentID, req.PurchaseFingerprint())
	} else {
		resp, replayed, err = s.engine.Settle(ctx, body, key)
	}
	if err != nil {
		if errors.Is(err, settle.ErrPaymentIDConflict) {
			s.writeSettleProblem(w, req, s.problems.New(web.SlugConflict,
				"the payment id "+req.PaymentID+" was first used for a purchase with other terms (scheme, network, asset, amount, payTo or resource); use a new id for a new purchase"),
				reasonPaymentIDConflict)
			return
		}
		if errors.Is(err, settle.ErrIdempotencyKeyConflict) {
			s.writeSettleProblem(w, req, s.problems.New(web.SlugUnprocessable,
				"the Idempotency-Key was first used with a different request body; use a new key for a new payment"),
				reasonIdempotencyKeyConflict)
			return
		}
		if errors.Is(err, settle.ErrClosed) {
			w.Header().Set("Retry-After", "5")
			writePaymentFailure(w, settleShape, http.StatusServiceUnavailable, x402.ReasonServiceUnavailable,
				"the facilitator is shutting down; retry the identical body shortly")
			return
		}
		s.logger.Error("settle failed", "err", err, "request_id", web.RequestID(r.Context()))
		writePaymentFailure(w, settleShape, http.StatusInternalServerError, reasonSettleInternal,
			"the facilitator failed to settle; retry the identical body with backoff, it is settled at most once")
		return
	}
	if replayed {
		w.Header().Set("Idempotency-Replayed", "true")
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, resp)
}

// settleProblem is a failed settle response that is also an RFC 9457
// problem document: the contract calls the answer to a reused
// Idempotency-Key a 422 problem, and says /settle keeps its payment shape on
// every status. One object satisfies both readings.
type settleProblem struct {
	x402.SettleResponse
	*web.Problem
}

// writeSettleProblem answers a settle with p, carrying reason (and p's
// detail as the message) in the settle members, and the network and payer
// of the request.
func (s *Service) writeSettleProblem(w http.ResponseWriter, req *x402.PaymentRequest, p *web.Problem, reason string) {
	body, err := json.Marshal(settleProblem{
		SettleResponse: x402.SettleResponse{ErrorReason: reason, ErrorMessage: p.Detail, Payer: req.Payer(), Network: req.Network()},
		Problem:        p,
	})
	if err != nil { // two plain structs: cannot fail
		panic(err)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// handleHealth handles "GET /health": 200 while accepting traffic, a 503
// problem once Close began so load balancers drain this instance.
func (s *Service) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.closing.Load() {
		s.problems.Write(w, r, s.problems.New(web.SlugServiceUnavailable, "the facilitator is shutting down"))
		return
	}
	web.WriteJSON(w, http.StatusOK, healthResponse{Status: "ok"})
}

// healthResponse is the body of GET /health.
type healthResponse struct {
	Status string `json:"status"`
}
