package evm_test

import (
	"context"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// BenchmarkVerify measures Verify in-process on the dev chain (decode not
// included): signature recovery plus the simulated transfer.
func BenchmarkVerify(b *testing.B) {
	d := mustDevChain(b)
	req := decode(b, signedBody(b, d, 2, evm.PayOptions{}))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v := d.Network.Verify(ctx, req); !v.IsValid {
				b.Fatalf("%+v", v)
			}
		}
	})
}

// BenchmarkDecodeAndVerify adds DecodeRequest of the body, as /verify does.
func BenchmarkDecodeAndVerify(b *testing.B) {
	d := mustDevChain(b)
	body := signedBody(b, d, 2, evm.PayOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := x402.DecodeRequest(body)
			if err != nil {
				b.Fatal(err)
			}
			if v := d.Network.Verify(ctx, req); !v.IsValid {
				b.Fatalf("%+v", v)
			}
		}
	})
}

// BenchmarkRecover measures EIP-712 digest plus ECDSA recovery of one signature.
func BenchmarkRecover(b *testing.B) {
	d := mustDevChain(b)
	req := decode(b, signedBody(b, d, 2, evm.PayOptions{}))
	a, err := evm.ParseAuthorization(req.Authorization)
	if err != nil {
		b.Fatal(err)
	}
	sig := common.FromHex(req.Signature)
	dom := d.Network.Domain()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got, err := evm.Recover(evm.Digest(dom, a), sig); err != nil || got != d.Payer {
			b.Fatal(got, err)
		}
	}
}

// BenchmarkSettle measures Prepare + Broadcast of b.N payments on the dev
// chain, then waits for every receipt: settlement throughput of one
// network's single worker, with receipts confirmed as they are mined.
func BenchmarkSettle(b *testing.B) {
	d := mustDevChain(b)
	ctx := context.Background()
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = signedBody(b, d, 2, evm.PayOptions{})
	}
	hashes := make([]string, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := decode(b, bodies[i])
		tx, fail, err := prepare(ctx, d.Network, req)
		if err != nil || fail != nil {
			b.Fatal(err, fail)
		}
		if err := d.Network.Broadcast(ctx, tx); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, tx.Hash)
	}
	for _, h := range hashes {
		r, err := d.WaitMined(ctx, common.HexToHash(h))
		if err != nil || r.Status != 1 {
			b.Fatal(h, err)
		}
	}
}
