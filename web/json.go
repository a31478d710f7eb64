package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// DecodeError says why a request body is not the JSON it should be. Field is
// set when one member has the wrong type (a validation failure, 422); it is
// empty when the body is not JSON at all (400).
type DecodeError struct {
	Field string
	Msg   string
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return e.Msg
}

// ReadBody reads at most limit bytes of r's body. A larger body yields an
// *http.MaxBytesError, which Problems maps to 413.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// Decode reads a JSON body of at most limit bytes into a T. An empty body
// decodes as the zero T when allowEmpty is set. Wrong member types come back
// as a *DecodeError naming the member.
func Decode[T any](w http.ResponseWriter, r *http.Request, limit int64, allowEmpty bool) (T, []byte, error) {
	var v T
	body, err := ReadBody(w, r, limit)
	if err != nil {
		return v, nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return v, body, nil
		}
		return v, body, &DecodeError{Msg: "the request body is empty; a JSON object is required"}
	}
	return v, body, Unmarshal(body, &v)
}

// Unmarshal decodes JSON into v, turning encoding/json's errors into
// *DecodeError with the member path where there is one.
func Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			field := typeErr.Field
			if field == "" {
				return &DecodeError{Msg: "the request body must be a JSON " + jsonKind(typeErr.Type.Kind().String()) + ", not " + typeErr.Value}
			}
			return &DecodeError{Field: field, Msg: "must be " + jsonKind(typeErr.Type.Kind().String()) + ", not " + typeErr.Value}
		case errors.As(err, &syntaxErr):
			return &DecodeError{Msg: fmt.Sprintf("the request body is not valid JSON (offset %d): %v", syntaxErr.Offset, err)}
		case errors.Is(err, io.ErrUnexpectedEOF):
			return &DecodeError{Msg: "the request body is truncated JSON"}
		default:
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				return err
			}
			return &DecodeError{Msg: "the request body is not valid JSON: " + err.Error()}
		}
	}
	if dec.More() {
		return &DecodeError{Msg: "the request body has data after the JSON value"}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return "a " + goKind
}

// WriteJSON writes v as a JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"title":"Internal Server Error","status":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(buf, '\n'))
}
