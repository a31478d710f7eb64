package web

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
)

// FieldError names one member of a request that failed validation.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem document. Errors carries validation
// failures (422) member by member.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
	// ErrorCode and Message are the ARD error envelope (ARD Appendix B):
	// written beside the RFC 9457 members when Problems.ARD is set, so
	// clients of either kind read the same document.
	ErrorCode string `json:"errorCode,omitempty"`
	Message   string `json:"message,omitempty"`

	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
}

// Error makes a Problem usable as an error, so handlers can return it.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Title + ": " + p.Detail
	}
	return p.Title
}

// The problem slugs both services use. The type URI of a problem is
// "<public-url>/developers#<slug>".
const (
	SlugBadRequest          = "bad-request"
	SlugNotFound            = "not-found"
	SlugMethodNotAllowed    = "method-not-allowed"
	SlugPayloadTooLarge     = "payload-too-large"
	SlugUnprocessable       = "unprocessable-content"
	SlugTooManyRequests     = "too-many-requests"
	SlugInternal            = "internal-server-error"
	SlugServiceUnavailable  = "service-unavailable"
	SlugUnsupportedMedia    = "unsupported-media-type"
	SlugNotImplemented      = "not-implemented"
	SlugUnauthorized        = "unauthorized"
	SlugForbidden           = "forbidden"
	SlugConflict            = "conflict"
	SlugNotAcceptable       = "not-acceptable"
	SlugBadGateway          = "bad-gateway"
	SlugGatewayTimeout      = "gateway-timeout"
	SlugRequestHeaderFields = "request-header-fields-too-large"
)

var slugTitles = map[string]struct {
	status int
	title  string
}{
	SlugBadRequest:         {http.StatusBadRequest, "Bad Request"},
	SlugNotFound:           {http.StatusNotFound, "Not Found"},
	SlugMethodNotAllowed:   {http.StatusMethodNotAllowed, "Method Not Allowed"},
	SlugPayloadTooLarge:    {http.StatusRequestEntityTooLarge, "Payload Too Large"},
	SlugUnprocessable:      {http.StatusUnprocessableEntity, "Unprocessable Content"},
	SlugTooManyRequests:    {http.StatusTooManyRequests, "Too Many Requests"},
	SlugInternal:           {http.StatusInternalServerError, "Internal Server Error"},
	SlugServiceUnavailable: {http.StatusServiceUnavailable, "Service Unavailable"},
	SlugUnsupportedMedia:   {http.StatusUnsupportedMediaType, "Unsupported Media Type"},
	SlugNotImplemented:     {http.StatusNotImplemented, "Not Implemented"},
	SlugUnauthorized:       {http.StatusUnauthorized, "Unauthorized"},
	SlugForbidden:          {http.StatusForbidden, "Forbidden"},
	SlugConflict:           {http.StatusConflict, "Conflict"},
	SlugNotAcceptable:      {http.StatusNotAcceptable, "Not Acceptable"},
	SlugBadGateway:         {http.StatusBadGateway, "Bad Gateway"},
	SlugGatewayTimeout:     {http.StatusGatewayTimeout, "Gateway Timeout"},
}

// Problems builds problem documents whose type URIs live under one base URL.
type Problems struct {
	// BaseURL is the service's public URL, without a trailing slash.
	BaseURL string
	Logger  *slog.Logger
	// ARD adds the ARD error members (errorCode, message) to every problem
	// written.
	ARD bool
}

// ARD error codes (ARD Appendix B).
const (
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodeUnauthenticated   = "UNAUTHENTICATED"
	CodeNotFound          = "NOT_FOUND"
	CodeRateLimitExceeded = "RATE_LIMIT_EXCEEDED"
	CodeInternal          = "INTERNAL_ERROR"
)

// ARDCode maps an HTTP status to the ARD error code an ARD client expects:
// any other refusal of the caller's request is INVALID_ARGUMENT, any server
// side failure INTERNAL_ERROR.
func ARDCode(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CodeUnauthenticated
	case status == http.StatusNotFound:
		return CodeNotFound
	case status == http.StatusTooManyRequests:
		return CodeRateLimitExceeded
	case status >= 500:
		return CodeInternal
	}
	return CodeInvalidArgument
}

// New returns the problem for slug with the given detail.
func (ps Problems) New(slug, detail string) *Problem {
	st, ok := slugTitles[slug]
	if !ok {
		st = slugTitles[SlugInternal]
		slug = SlugInternal
	}
	return &Problem{Type: ps.BaseURL + "/developers#" + slug, Title: st.title, Status: st.status, Detail: detail}
}

// Invalid returns a 422 problem listing every field error.
func (ps Problems) Invalid(detail string, errs ...FieldError) *Problem {
	p := ps.New(SlugUnprocessable, detail)
	p.Errors = errs
	return p
}

// Write writes err as a problem document. A *Problem is written as it is;
// a body-limit or JSON error from Decode maps to its status; anything else is
// a 500 with a generic detail, logged with the request id, never shown.
func (ps Problems) Write(w http.ResponseWriter, r *http.Request, err error) {
	var p *Problem
	if !errors.As(err, &p) {
		p = ps.FromError(err)
		if p.Status == http.StatusInternalServerError && ps.Logger != nil {
			ps.Logger.Error("internal error", "err", err, "request_id", RequestID(r.Context()),
				"method", r.Method, "path", r.URL.Path)
		}
	}
	if p.Type == "" {
		p.Type = ps.BaseURL + "/developers#" + SlugInternal
	}
	if ps.ARD {
		cp := *p // never change a problem the caller may reuse
		cp.ErrorCode = ARDCode(cp.Status)
		cp.Message = cp.Detail
		if cp.Message == "" {
			cp.Message = cp.Title
		}
		p = &cp
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// FromError maps the toolkit's own errors (body too large, malformed JSON) to
// problems; any other error becomes a generic 500.
func (ps Problems) FromError(err error) *Problem {
	var tooLarge *http.MaxBytesError
	var syntax *DecodeError
	switch {
	case errors.As(err, &tooLarge):
		return ps.New(SlugPayloadTooLarge, "the request body is larger than "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
	case errors.As(err, &syntax):
		if syntax.Field != "" {
			return ps.Invalid(syntax.Error(), FieldError{Field: syntax.Field, Message: syntax.Msg})
		}
		return ps.New(SlugBadRequest, syntax.Error())
	}
	return ps.New(SlugInternal, "the server failed to handle the request; retry with backoff")
}

// NotFound answers every unknown path with a 404 problem.
func (ps Problems) NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.Write(w, r, ps.New(SlugNotFound, "no route for "+r.Method+" "+r.URL.Path))
	})
}

// MethodNotAllowed answers a known path called with the wrong method.
// httprouter sets the Allow header before calling it.
func (ps Problems) MethodNotAllowed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.Write(w, r, ps.New(SlugMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+w.Header().Get("Allow")))
	})
}

// Panic is httprouter's last-resort PanicHandler: a 500 problem, logged.
func (ps Problems) Panic(w http.ResponseWriter, r *http.Request, v any) {
	if ps.Logger != nil {
		ps.Logger.Error("panic in handler", "panic", v, "request_id", RequestID(r.Context()), "path", r.URL.Path)
	}
	ps.Write(w, r, ps.New(SlugInternal, "the server failed to handle the request; retry with backoff"))
}
