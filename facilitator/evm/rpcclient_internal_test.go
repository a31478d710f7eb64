package evm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

type headService struct{}

func (headService) BlockNumber() hexutil.Uint64 { return 7 }

// Concurrent calls to a network's node reuse their connections: 16 callers
// making 25 calls each open about 16 connections, not one per call beyond
// the two the default transport keeps (which left a hundred sockets a
// second in TIME_WAIT under settlement load).
func TestRPCClientKeepsConnectionsForConcurrentCalls(t *testing.T) {
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", headService{}); err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int64
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()
	defer srv.Stop()

	rc, err := rpc.DialOptions(context.Background(), hs.URL, rpc.WithHTTPClient(rpcHTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	const callers, calls = 16, 25
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				var n hexutil.Uint64
				if err := rc.CallContext(context.Background(), &n, "eth_blockNumber"); err != nil || n != 7 {
					t.Errorf("eth_blockNumber = %d, %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := opened.Load(); n > 2*callers {
		t.Fatalf("%d connections opened for %d calls from %d callers; want at most %d", n, callers*calls, callers, 2*callers)
	}
}
