package evm

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// Domain is an EIP-712 domain of an EIP-3009 token.
type Domain struct {
	Name              string
	Version           string
	ChainID           *big.Int
	VerifyingContract common.Address
}

// TransferAuthorization is an EIP-3009 TransferWithAuthorization message in
// typed form (x402.Authorization is the same message as sent on the wire).
type TransferAuthorization struct {
	From        common.Address
	To          common.Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
}

var (
	domainTypeHash   = crypto.Keccak256Hash([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	transferTypeHash = crypto.Keccak256Hash([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))
	cancelTypeHash   = crypto.Keccak256Hash([]byte("CancelAuthorization(address authorizer,bytes32 nonce)"))
)

// Separator returns the domain separator, hashStruct(EIP712Domain).
func (d Domain) Separator() common.Hash {
	return crypto.Keccak256Hash(
		domainTypeHash[:],
		crypto.Keccak256([]byte(d.Name)),
		crypto.Keccak256([]byte(d.Version)),
		word(d.ChainID),
		common.LeftPadBytes(d.VerifyingContract[:], 32),
	)
}

// StructHash returns hashStruct(TransferWithAuthorization).
func (a TransferAuthorization) StructHash() common.Hash {
	return crypto.Keccak256Hash(
		transferTypeHash[:],
		common.LeftPadBytes(a.From[:], 32),
		common.LeftPadBytes(a.To[:], 32),
		word(a.Value),
		word(a.ValidAfter),
		word(a.ValidBefore),
		a.Nonce[:],
	)
}

// Digest returns the EIP-712 digest the payer signs:
// keccak256(0x1901 ‖ domainSeparator ‖ structHash).
func Digest(d Domain, a TransferAuthorization) common.Hash {
	return typedDigest(d.Separator(), a.StructHash())
}

func typedDigest(separator, structHash common.Hash) common.Hash {
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, separator[:], structHash[:])
}

// word encodes a uint256 as 32 big-endian bytes (nil as zero).
func word(n *big.Int) []byte {
	if n == nil {
		return make([]byte, 32)
	}
	return common.LeftPadBytes(n.Bytes(), 32)
}

// SignAuthorization signs the wire authorization over domain with key, the
// way a wallet's eth_signTypedData_v4 does: 65 bytes r ‖ s ‖ v with v in
// {27, 28}.
func SignAuthorization(key *ecdsa.PrivateKey, domain Domain, auth x402.Authorization) ([]byte, error) {
	if key == nil {
		return nil, errors.New("evm: no signing key")
	}
	if domain.ChainID == nil {
		return nil, errors.New("evm: domain has no chain id")
	}
	a, err := ParseAuthorization(auth)
	if err != nil {
		return nil, err
	}
	return signDigest(key, Digest(domain, a))
}

// ParseAuthorization converts a wire authorization to typed form.
func ParseAuthorization(a x402.Authorization) (TransferAuthorization, error) {
	var t TransferAuthorization
	if !x402.IsAddress(a.From) || !x402.IsAddress(a.To) {
		return t, errors.New("evm: authorization from/to must be 0x addresses")
	}
	t.From, t.To = common.HexToAddress(a.From), common.HexToAddress(a.To)
	var err error
	if t.Value, err = x402.ParseUint256(string(a.Value)); err != nil {
		return t, fmt.Errorf("evm: authorization value: %w", err)
	}
	if t.ValidAfter, err = x402.ParseUint256(string(a.ValidAfter)); err != nil {
		return t, fmt.Errorf("evm: authorization validAfter: %w", err)
	}
	if t.ValidBefore, err = x402.ParseUint256(string(a.ValidBefore)); err != nil {
		return t, fmt.Errorf("evm: authorization validBefore: %w", err)
	}
	n, err := hexutil.Decode(a.Nonce)
	if err != nil || len(n) != 32 {
		return t, errors.New("evm: authorization nonce must be 32 bytes of 0x hex")
	}
	copy(t.Nonce[:], n)
	return t, nil
}

// Wire converts a typed authorization to its wire form (checksummed
// addresses, decimal strings).
func (a TransferAuthorization) Wire() x402.Authorization {
	return x402.Authorization{
		From:        a.From.Hex(),
		To:          a.To.Hex(),
		Value:       x402.Decimal(a.Value.String()),
		ValidAfter:  x402.Decimal(a.ValidAfter.String()),
		ValidBefore: x402.Decimal(a.ValidBefore.String()),
		Nonce:       hexutil.Encode(a.Nonce[:]),
	}
}

// SignCancel signs an EIP-3009 CancelAuthorization for nonce.
func SignCancel(key *ecdsa.PrivateKey, domain Domain, authorizer common.Address, nonce [32]byte) ([]byte, error) {
	h := crypto.Keccak256Hash(cancelTypeHash[:], common.LeftPadBytes(authorizer[:], 32), nonce[:])
	return signDigest(key, typedDigest(domain.Separator(), h))
}

func signDigest(key *ecdsa.PrivateKey, digest common.Hash) ([]byte, error) {
	sig, err := crypto.Sign(digest[:], key)
	if err != nil {
		// crypto.Sign's errors never include the key.
		return nil, fmt.Errorf("evm: sign: %w", err)
	}
	sig[64] += 27
	return sig, nil
}

// Recover returns the address whose key made the 65-byte signature over
// digest. V may be 27/28 (wallets) or 0/1 (crypto.Sign); high-S (malleable)
// signatures are refused, as the token contract refuses them.
func Recover(digest common.Hash, sig []byte) (common.Address, error) {
	return recoverSig(digest, sig, true)
}

// recoverAnyS is Recover accepting a high S, as viem's recoverAddress does:
// the official facilitator finds such a signature the payer's and leaves it
// to the token to refuse.
func recoverAnyS(digest common.Hash, sig []byte) (common.Address, error) {
	return recoverSig(digest, sig, false)
}

func recoverSig(digest common.Hash, sig []byte, lowS bool) (common.Address, error) {
	if len(sig) != 65 {
		return common.Address{}, fmt.Errorf("evm: signature is %d bytes, want 65", len(sig))
	}
	s := make([]byte, 65)
	copy(s, sig)
	if s[64] >= 27 {
		s[64] -= 27
	}
	if !crypto.ValidateSignatureValues(s[64], new(big.Int).SetBytes(s[:32]), new(big.Int).SetBytes(s[32:64]), lowS) {
		return common.Address{}, errors.New("evm: signature values out of range (v, r or a high s)")
	}
	pub, err := crypto.SigToPub(digest[:], s)
	if err != nil {
		return common.Address{}, fmt.Errorf("evm: recover: %w", err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}
