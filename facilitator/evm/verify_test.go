package evm_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// wrap6492 wraps sig as a counterfactual wallet's ERC-6492 signature.
func wrap6492(t *testing.T, sig []byte) []byte {
	t.Helper()
	addr, _ := abi.NewType("address", "", nil)
	byt, _ := abi.NewType("bytes", "", nil)
	enc, err := abi.Arguments{{Type: addr}, {Type: byt}, {Type: byt}}.Pack(
		common.HexToAddress("0x0000000000000000000000000000000000fac709"), []byte{0xde, 0xad}, sig)
	if err != nil {
		t.Fatal(err)
	}
	return append(enc, common.FromHex("0x6492649264926492649264926492649264926492649264926492649264926492")...)
}

// TestVerifyReasons covers every reason Verify can give, for v1 and v2, on
// the dev chain: each case builds a body, and Verify must answer exactly the
// expected reason (or valid) with the payer set.
func TestVerifyReasons(t *testing.T) {
	ctx := context.Background()
	d := mustDevChain(t)

	// A deployed ERC-1271 wallet owned by the payer, holding USDC.
	wallet, err := d.DeployWallet1271(ctx, d.Payer)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Mint(ctx, wallet, big.NewInt(1_000_000)); err != nil {
		t.Fatal(err)
	}
	undeployed := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	other := common.HexToAddress("0x1111111111111111111111111111111111111111")
	var usedNonce [32]byte
	if _, err := rand.Read(usedNonce[:]); err != nil {
		t.Fatal(err)
	}
	if err := d.CancelAuthorization(ctx, d.PayerKey, usedNonce); err != nil {
		t.Fatal(err)
	}

	type tc struct {
		name   string
		opt    evm.PayOptions
		keyFor string // "" payer, else DevKey role used to sign instead
		edit   func(t *testing.T, m map[string]any, v int)
		want   string // "" means valid
		msg    string // substring of invalidMessage
	}
	cases := []tc{
		{name: "valid EOA payment"},
		{name: "v as 0/1 is normalised", edit: func(t *testing.T, m map[string]any, v int) {
			sig := common.FromHex(get(m, "paymentPayload.payload.signature").(string))
			sig[64] -= 27
			set(m, "paymentPayload.payload.signature", hexutil.Encode(sig))
		}},
		{name: "payload scheme is not exact", want: x402.ReasonInvalidScheme, edit: func(t *testing.T, m map[string]any, v int) {
			if v == 1 {
				set(m, "paymentPayload.scheme", "upto")
			} else {
				set(m, "paymentPayload.accepted.scheme", "upto")
			}
		}},
		{name: "requirements scheme is not exact", want: x402.ReasonInvalidScheme, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, "paymentRequirements.scheme", "upto")
		}},
		{name: "extra is null", want: x402.ReasonMissingEIP712Domain, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, "paymentRequirements.extra", nil)
		}},
		{name: "extra lacks name", want: x402.ReasonMissingEIP712Domain, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, "paymentRequirements.extra", map[string]any{"version": "2"})
		}},
		{name: "extra lacks version", want: x402.ReasonMissingEIP712Domain, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, "paymentRequirements.extra", map[string]any{"name": "USDC"})
		}},
		{name: "payload network differs from requirements", want: x402.ReasonNetworkMismatch, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, payloadNetworkPath(v), otherNetwork(v))
		}},
		{name: "both name another network", want: x402.ReasonNetworkMismatch, edit: func(t *testing.T, m map[string]any, v int) {
			set(m, payloadNetworkPath(v), otherNetwork(v))
			set(m, "paymentRequirements.network", otherNetwork(v))
		}},
		// The payer signs over the asset the requirements name.
		{name: "asset is not a contract", want: x402.ReasonAssetNotDeployed, edit: reSignAsset(d, other)},
		{name: "asset is a contract but not this network's token", want: x402.ReasonAssetMismatch, edit: reSignAsset(d, wallet)},
		{name: "asset changed after signing", want: x402.ReasonSignature, edit: func(t *testing.T, m map[string]any, v int) {
			setRequirements(m, v, "asset", other.Hex())
		}},
		{name: "corrupted signature", want: x402.ReasonSignature, edit: func(t *testing.T, m map[string]any, v int) {
			sig := common.FromHex(get(m, "paymentPayload.payload.signature").(string))
			sig[5] ^= 0xff
			set(m, "paymentPayload.payload.signature", hexutil.Encode(sig))
		}},
		{name: "signed by someone else", keyFor: "merchant", opt: evm.PayOptions{From: &d.Payer}, want: x402.ReasonSignature, msg: "not the payer"},
		{name: "signed over another domain name", want: x402.ReasonSignature,
			opt: evm.PayOptions{Domain: &evm.Domain{Name: "USD Coin", Version: "2", ChainID: bigp(1337), VerifyingContract: d.Asset}}},
		{name: "recipient differs from payTo", opt: evm.PayOptions{To: &other}, want: x402.ReasonRecipientMismatch},
		{name: "expired", opt: evm.PayOptions{ValidBefore: bigp(now() - 10)}, want: x402.ReasonValidBefore},
		{name: "validBefore under 6 s away", opt: evm.PayOptions{ValidBefore: bigp(now() + 3)}, want: x402.ReasonValidBefore},
		{name: "not yet valid", opt: evm.PayOptions{ValidAfter: bigp(now() + 60)}, want: x402.ReasonValidAfter},
		{name: "underpaid", opt: evm.PayOptions{Value: bigp(testAmount - 1)}, want: x402.ReasonAuthorizationValue},
		{name: "overpaid (exact means exact)", opt: evm.PayOptions{Value: bigp(testAmount + 1)}, want: x402.ReasonAuthorizationValue},
		{name: "insufficient balance", keyFor: "pauper", want: x402.ReasonInsufficientBalance, msg: "holds 0"},
		{name: "nonce already used (canceled)", opt: evm.PayOptions{Nonce: &usedNonce}, want: x402.ReasonNonceAlreadyUsed},
		{name: "token name differs from extra.name", want: x402.ReasonTokenNameMismatch, edit: reSign(d, "USD Coin", "2")},
		{name: "token version differs from extra.version", want: x402.ReasonTokenVersionMismatch, edit: reSign(d, "USDC", "1")},
		{name: "undeployed smart wallet (ERC-6492)", opt: evm.PayOptions{From: &undeployed}, want: x402.ReasonFactoryNotAllowed,
			edit: func(t *testing.T, m map[string]any, v int) {
				sig := common.FromHex(get(m, "paymentPayload.payload.signature").(string))
				set(m, "paymentPayload.payload.signature", hexutil.Encode(wrap6492(t, sig)))
			}},
		// An address without code signs 65 bytes; the official facilitator
		// calls every other length an invalid signature.
		{name: "64-byte compact signature (EIP-2098)", want: x402.ReasonSignature, msg: "64 bytes",
			edit: editSig(func(sig []byte) []byte {
				compact := sig[:64]
				if sig[64] == 28 || sig[64] == 1 {
					compact[32] |= 0x80
				}
				return compact
			})},
		{name: "66-byte signature", want: x402.ReasonSignature, msg: "66 bytes",
			edit: editSig(func(sig []byte) []byte { return append(sig, 0) })},
		{name: "30,000-byte signature", want: x402.ReasonSignature, msg: "30000 bytes",
			edit: editSig(func(sig []byte) []byte { return append(sig, make([]byte, 30_000-65)...) })},
		// The payer's own key, s replaced by n-s: it recovers to the payer
		// (as in viem), and the token refuses it in the simulation.
		{name: "high-s signature", want: x402.ReasonSimulationFailed, edit: editSig(highS)},
		{name: "ERC-1271 wallet, owner's signature", opt: evm.PayOptions{From: &wallet}},
		{name: "ERC-1271 wallet, ERC-6492-wrapped signature of a deployed wallet", opt: evm.PayOptions{From: &wallet},
			edit: func(t *testing.T, m map[string]any, v int) {
				sig := common.FromHex(get(m, "paymentPayload.payload.signature").(string))
				set(m, "paymentPayload.payload.signature", hexutil.Encode(wrap6492(t, sig)))
			}},
		{name: "ERC-1271 wallet, stranger's signature", keyFor: "merchant", opt: evm.PayOptions{From: &wallet},
			want: x402.ReasonSignature, msg: "ERC-1271"},
		{name: "transfer reverts for another reason", want: x402.ReasonSimulationFailed, msg: "zero address",
			edit: func(t *testing.T, m map[string]any, v int) {
				zero := "0x0000000000000000000000000000000000000000"
				setRequirements(m, v, "payTo", zero)
				reSignTo(t, d, m, v, common.Address{})
			}},
	}
	for _, v := range []int{1, 2} {
		for _, c := range cases {
			t.Run("v"+string(rune('0'+v))+"/"+c.name, func(t *testing.T) {
				key := d.PayerKey
				if c.keyFor != "" {
					key = evm.DevKey(c.keyFor)
				}
				body := signedBodyWith(t, d, v, key, c.opt)
				if c.edit != nil {
					body = edit(t, body, func(m map[string]any) { c.edit(t, m, v) })
				}
				req := decode(t, body)
				got := d.Network.Verify(context.Background(), req)
				want := c.want
				if v == 2 && want == x402.ReasonAuthorizationValue {
					// The official v2 facilitator names the fault differently.
					want = x402.ReasonAuthorizationValueMismatch
				}
				if want == "" {
					if !got.IsValid {
						t.Fatalf("want valid, got %+v", got)
					}
				} else if got.IsValid || got.InvalidReason != want {
					t.Fatalf("want %s, got %+v", want, got)
				}
				if got.Payer == "" || !strings.EqualFold(got.Payer, req.Payer()) {
					t.Errorf("payer = %q, want %q", got.Payer, req.Payer())
				}
				if c.want != "" && got.InvalidMessage == "" {
					t.Errorf("no invalidMessage")
				}
				if c.msg != "" && !strings.Contains(got.InvalidMessage, c.msg) {
					t.Errorf("invalidMessage %q lacks %q", got.InvalidMessage, c.msg)
				}
			})
		}
	}
}

// editSig returns an edit that replaces the signature by f of it.
func editSig(f func(sig []byte) []byte) func(t *testing.T, m map[string]any, v int) {
	return func(t *testing.T, m map[string]any, v int) {
		sig := common.FromHex(get(m, "paymentPayload.payload.signature").(string))
		set(m, "paymentPayload.payload.signature", hexutil.Encode(f(sig)))
	}
}

// highS returns the malleable twin of a 65-byte signature: s' = n - s with
// the recovery bit flipped, which recovers to the same address.
func highS(sig []byte) []byte {
	out := bytes.Clone(sig)
	s := new(big.Int).Sub(secp256k1N, new(big.Int).SetBytes(sig[32:64]))
	s.FillBytes(out[32:64])
	switch out[64] {
	case 27, 28:
		out[64] = 55 - out[64]
	default:
		out[64] ^= 1
	}
	return out
}

var secp256k1N, _ = new(big.Int).SetString("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", 16)

// reSignAsset returns an edit that names asset in the requirements and
// signs over it, so only the asset check can catch it.
func reSignAsset(d *evm.DevChain, asset common.Address) func(t *testing.T, m map[string]any, v int) {
	return func(t *testing.T, m map[string]any, v int) {
		setRequirements(m, v, "asset", asset.Hex())
		resignBody(t, d, m, evm.Domain{Name: "USDC", Version: "2", ChainID: bigp(1337), VerifyingContract: asset})
	}
}

// TestSettleReasons: settle re-verifies without simulating and reads the
// gas estimate's revert as the official settle does, so where verify
// diagnoses (token name, version, a high s), settle answers
// invalid_exact_evm_signature, the token's own words.
func TestSettleReasons(t *testing.T) {
	d := mustDevChain(t)
	cases := []struct {
		name       string
		edit       func(t *testing.T, m map[string]any, v int)
		wantVerify string
		wantSettle string
	}{
		{"token name differs from extra.name", reSign(d, "USD Coin", "2"), x402.ReasonTokenNameMismatch, x402.ReasonSignature},
		{"token version differs from extra.version", reSign(d, "USDC", "1"), x402.ReasonTokenVersionMismatch, x402.ReasonSignature},
		{"high-s signature", editSig(highS), x402.ReasonSimulationFailed, x402.ReasonSignature},
		{"64-byte compact signature", editSig(func(sig []byte) []byte { return sig[:64] }), x402.ReasonSignature, x402.ReasonSignature},
		{"asset is not a contract", reSignAsset(d, common.HexToAddress("0x1111111111111111111111111111111111111111")), x402.ReasonAssetNotDeployed, x402.ReasonAssetNotDeployed},
	}
	for _, v := range []int{1, 2} {
		for _, c := range cases {
			t.Run("v"+string(rune('0'+v))+"/"+c.name, func(t *testing.T) {
				body := edit(t, signedBodyWith(t, d, v, d.PayerKey, evm.PayOptions{}), func(m map[string]any) { c.edit(t, m, v) })
				req := decode(t, body)
				if got := d.Network.Verify(context.Background(), req); got.InvalidReason != c.wantVerify {
					t.Errorf("verify: %+v, want %s", got, c.wantVerify)
				}
				reason := ""
				if chk := d.Network.Check(context.Background(), req); !chk.IsValid {
					reason = chk.InvalidReason
				} else {
					tr, fail, err := d.Network.Simulate(context.Background(), req)
					if err != nil || tr != nil || fail == nil {
						t.Fatalf("simulate: %+v %+v %v, want a failure", tr, fail, err)
					}
					reason = fail.ErrorReason
				}
				if reason != c.wantSettle {
					t.Errorf("settle: %s, want %s", reason, c.wantSettle)
				}
			})
		}
	}
}

// reSign returns an edit that claims another EIP-712 domain in extra and
// signs over it, so the signature is consistent with extra but not with the
// token: only the simulation and its diagnosis can catch it.
func reSign(d *evm.DevChain, name, version string) func(t *testing.T, m map[string]any, v int) {
	return func(t *testing.T, m map[string]any, v int) {
		setRequirements(m, v, "extra", map[string]any{"name": name, "version": version})
		resignBody(t, d, m, evm.Domain{Name: name, Version: version, ChainID: bigp(1337), VerifyingContract: d.Asset})
	}
}

// reSignTo changes authorization.to and signs again over the token's domain.
func reSignTo(t *testing.T, d *evm.DevChain, m map[string]any, v int, to common.Address) {
	set(m, "paymentPayload.payload.authorization.to", to.Hex())
	resignBody(t, d, m, d.Network.Domain())
}

func resignBody(t *testing.T, d *evm.DevChain, m map[string]any, dom evm.Domain) {
	a := get(m, "paymentPayload.payload.authorization").(map[string]any)
	auth := x402.Authorization{
		From: a["from"].(string), To: a["to"].(string), Value: x402.Decimal(a["value"].(string)),
		ValidAfter: x402.Decimal(a["validAfter"].(string)), ValidBefore: x402.Decimal(a["validBefore"].(string)),
		Nonce: a["nonce"].(string),
	}
	sig, err := evm.SignAuthorization(d.PayerKey, dom, auth)
	if err != nil {
		t.Fatal(err)
	}
	set(m, "paymentPayload.payload.signature", hexutil.Encode(sig))
}
