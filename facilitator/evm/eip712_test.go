package evm_test

import (
	"encoding/json"
	"math/big"
	"os"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

type vectorFile struct {
	TypeHash string `json:"typeHash"`
	Domains  []struct {
		Name, Version     string
		ChainID           int64  `json:"chainId"`
		VerifyingContract string `json:"verifyingContract"`
		Separator         string `json:"separator"`
	} `json:"domains"`
	Authorization struct {
		PrivateKey  string `json:"privateKey"`
		Domain      int    `json:"domain"`
		From, To    string
		Value       string `json:"value"`
		ValidAfter  string `json:"validAfter"`
		ValidBefore string `json:"validBefore"`
		Nonce       string `json:"nonce"`
		StructHash  string `json:"structHash"`
		Digest      string `json:"digest"`
		Signature   string `json:"signature"`
	} `json:"authorization"`
}

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	b, err := os.ReadFile("../../testdata/vectors/eip3009.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGoldenVectors checks our EIP-712 code against the published vectors,
// and checks the vectors themselves by a hand calculation that shares no
// code with ours: keccak of the type strings and of the ABI-encoded fields,
// step by step.
func TestGoldenVectors(t *testing.T) {
	v := loadVectors(t)
	pad := func(b []byte) []byte { return common.LeftPadBytes(b, 32) }
	dec := func(s string) []byte { n, _ := new(big.Int).SetString(s, 10); return pad(n.Bytes()) }

	// Step 1: the type hash is keccak256 of the type string.
	typeHash := crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))
	if hexutil.Encode(typeHash) != v.TypeHash {
		t.Fatalf("type hash %x", typeHash)
	}
	domainType := crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	for _, d := range v.Domains {
		// Step 2: domain separator = keccak(typeHash ‖ keccak(name) ‖ keccak(version) ‖ chainId ‖ contract).
		hand := crypto.Keccak256(domainType, crypto.Keccak256([]byte(d.Name)), crypto.Keccak256([]byte(d.Version)),
			pad(big.NewInt(d.ChainID).Bytes()), pad(common.HexToAddress(d.VerifyingContract).Bytes()))
		if hexutil.Encode(hand) != d.Separator {
			t.Errorf("%s: hand separator %x, vector %s", d.Name, hand, d.Separator)
		}
		ours := evm.Domain{Name: d.Name, Version: d.Version, ChainID: big.NewInt(d.ChainID), VerifyingContract: common.HexToAddress(d.VerifyingContract)}.Separator()
		if ours.Hex() != d.Separator {
			t.Errorf("%s: our separator %s, vector %s", d.Name, ours.Hex(), d.Separator)
		}
	}

	a := v.Authorization
	d := v.Domains[a.Domain]
	// Step 3: struct hash = keccak(typeHash ‖ from ‖ to ‖ value ‖ validAfter ‖ validBefore ‖ nonce).
	handStruct := crypto.Keccak256(typeHash, pad(common.HexToAddress(a.From).Bytes()), pad(common.HexToAddress(a.To).Bytes()),
		dec(a.Value), dec(a.ValidAfter), dec(a.ValidBefore), common.FromHex(a.Nonce))
	if hexutil.Encode(handStruct) != a.StructHash {
		t.Fatalf("hand struct hash %x", handStruct)
	}
	// Step 4: digest = keccak(0x19 0x01 ‖ separator ‖ structHash).
	handDigest := crypto.Keccak256([]byte{0x19, 0x01}, common.FromHex(d.Separator), handStruct)
	if hexutil.Encode(handDigest) != a.Digest {
		t.Fatalf("hand digest %x", handDigest)
	}

	wire := x402.Authorization{From: a.From, To: a.To, Value: x402.Decimal(a.Value), ValidAfter: x402.Decimal(a.ValidAfter),
		ValidBefore: x402.Decimal(a.ValidBefore), Nonce: a.Nonce}
	typed, err := evm.ParseAuthorization(wire)
	if err != nil {
		t.Fatal(err)
	}
	domain := evm.Domain{Name: d.Name, Version: d.Version, ChainID: big.NewInt(d.ChainID), VerifyingContract: common.HexToAddress(d.VerifyingContract)}
	if got := typed.StructHash().Hex(); got != a.StructHash {
		t.Errorf("our struct hash %s", got)
	}
	if got := evm.Digest(domain, typed).Hex(); got != a.Digest {
		t.Errorf("our digest %s", got)
	}

	// go-ethereum's generic EIP-712 implementation agrees.
	td := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "version", Type: "string"},
				{Name: "chainId", Type: "uint256"}, {Name: "verifyingContract", Type: "address"}},
			"TransferWithAuthorization": {{Name: "from", Type: "address"}, {Name: "to", Type: "address"},
				{Name: "value", Type: "uint256"}, {Name: "validAfter", Type: "uint256"},
				{Name: "validBefore", Type: "uint256"}, {Name: "nonce", Type: "bytes32"}},
		},
		PrimaryType: "TransferWithAuthorization",
		Domain: apitypes.TypedDataDomain{Name: d.Name, Version: d.Version, ChainId: math.NewHexOrDecimal256(d.ChainID),
			VerifyingContract: d.VerifyingContract},
		Message: apitypes.TypedDataMessage{"from": a.From, "to": a.To, "value": a.Value, "validAfter": a.ValidAfter,
			"validBefore": a.ValidBefore, "nonce": a.Nonce},
	}
	gd, _, err := apitypes.TypedDataAndHash(td)
	if err != nil {
		t.Fatal(err)
	}
	if hexutil.Encode(gd) != a.Digest {
		t.Errorf("apitypes digest %x", gd)
	}

	// Signing is deterministic (RFC 6979): our signature equals the vector's.
	key, err := crypto.ToECDSA(common.FromHex(a.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := evm.SignAuthorization(key, domain, wire)
	if err != nil {
		t.Fatal(err)
	}
	if hexutil.Encode(sig) != a.Signature {
		t.Errorf("signature %x", sig)
	}
	got, err := evm.Recover(common.HexToHash(a.Digest), common.FromHex(a.Signature))
	if err != nil || got != common.HexToAddress(a.From) {
		t.Errorf("recover = %s, %v", got.Hex(), err)
	}
}

func TestRecoverRefusesMalformedSignatures(t *testing.T) {
	v := loadVectors(t)
	digest := common.HexToHash(v.Authorization.Digest)
	good := common.FromHex(v.Authorization.Signature)
	from := common.HexToAddress(v.Authorization.From)

	zeroOne := append([]byte{}, good...)
	zeroOne[64] -= 27
	if got, err := evm.Recover(digest, zeroOne); err != nil || got != from {
		t.Errorf("v=0/1 form: %s %v", got.Hex(), err)
	}
	// The malleable twin (s' = n - s, v flipped) recovers the same key but is refused.
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(good[32:64])
	high := append([]byte{}, good...)
	copy(high[32:64], common.LeftPadBytes(new(big.Int).Sub(n, s).Bytes(), 32))
	high[64] ^= 1
	if _, err := evm.Recover(digest, high); err == nil {
		t.Error("high-s signature accepted")
	}
	badV := append([]byte{}, good...)
	badV[64] = 29
	if _, err := evm.Recover(digest, badV); err == nil {
		t.Error("v=29 accepted")
	}
	if _, err := evm.Recover(digest, good[:64]); err == nil {
		t.Error("64-byte signature accepted")
	}
}
