package sources

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
)

// RPCError is a JSON-RPC error answered by an MCP server.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// JSON-RPC error codes the client acts on.
const (
	// CodeMethodNotFound answered to server/discover means the server
	// predates the stateless revision: fall back to initialize.
	CodeMethodNotFound = -32601
	// CodeUnsupportedProtocolVersion is the MCP code for a protocol version
	// the server does not speak.
	CodeUnsupportedProtocolVersion = -32022
)

func (e *RPCError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
}

// rpcResponse is one JSON-RPC response.
type rpcResponse struct {
	Result json.RawMessage
	Error  *RPCError
}

var errNoResponse = errors.New("no JSON-RPC response for the request")

// Bounds on what decodeRPCResponse scans, besides the body size the
// Fetcher already caps.
const (
	maxSSELine   = 4 << 20
	maxSSEEvents = 10_000
)

// decodeRPCResponse finds the response to request id in an HTTP body that
// is either application/json (one message or a batch) or text/event-stream
// (events whose data is a JSON-RPC message; notifications and
// server-to-client requests before the response are skipped).
func decodeRPCResponse(contentType string, body []byte, id int64) (*rpcResponse, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		return decodeSSE(body, id)
	}
	if r, ok := matchMessage(bytes.TrimSpace(body), id); ok {
		return r, nil
	}
	return nil, errNoResponse
}

func decodeSSE(body []byte, id int64) (*rpcResponse, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	var data []string
	var event string
	events := 0
	dispatch := func() (*rpcResponse, bool) {
		defer func() { data, event = data[:0], "" }()
		if len(data) == 0 || (event != "" && event != "message") {
			return nil, false
		}
		events++
		return matchMessage([]byte(strings.Join(data, "\n")), id)
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if r, ok := dispatch(); ok {
				return r, nil
			}
			if events > maxSSEEvents {
				return nil, fmt.Errorf("%w within %d events", errNoResponse, maxSSEEvents)
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // comment (keep-alive)
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			event = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading event stream: %w", err)
	}
	// A stream cut without a final blank line still dispatches its last
	// event: the server closed the connection after sending the response.
	if r, ok := dispatch(); ok {
		return r, nil
	}
	return nil, errNoResponse
}

// scanSSELines splits on \r\n, \n or \r, as the event-stream format allows.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\r' {
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if !atEOF {
				return 0, nil, nil // need one more byte to know if \n follows
			}
		}
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// wireMessage is any JSON-RPC message; only responses are acted on.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// matchMessage decodes one message or a batch and returns the response
// whose id is id.
func matchMessage(b []byte, id int64) (*rpcResponse, bool) {
	if len(b) == 0 {
		return nil, false
	}
	var msgs []wireMessage
	if b[0] == '[' {
		if json.Unmarshal(b, &msgs) != nil {
			return nil, false
		}
	} else {
		var m wireMessage
		if json.Unmarshal(b, &m) != nil {
			return nil, false
		}
		msgs = []wireMessage{m}
	}
	for _, m := range msgs {
		if m.Method != "" || !sameID(m.ID, id) {
			continue
		}
		if m.Error != nil {
			return &rpcResponse{Error: m.Error}, true
		}
		if len(m.Result) > 0 && !bytes.Equal(m.Result, []byte("null")) {
			return &rpcResponse{Result: m.Result}, true
		}
	}
	return nil, false
}

// sameID compares a JSON-RPC id with ours; servers echo it as a number or,
// against the specification but in the wild, as a string.
func sameID(raw json.RawMessage, id int64) bool {
	want := fmt.Sprint(id)
	s := string(bytes.TrimSpace(raw))
	return s == want || s == `"`+want+`"`
}
