package evm

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// The test contracts, compiled by testdata/contracts/build.sh (which copies
// its output here, because go:embed cannot reach testdata/ from this
// package). Their sources are testdata/contracts/*.sol.
var (
	//go:embed contracts/TestUSDC.abi
	testUSDCABI string
	//go:embed contracts/TestUSDC.bin
	testUSDCBin string
	//go:embed contracts/TestWallet1271.abi
	testWalletABI string
	//go:embed contracts/TestWallet1271.bin
	testWalletBin string
)

// tokenABI is the FiatToken-compatible surface the facilitator calls on any
// asset. The test token's ABI is a superset of what real USDC exposes for
// these methods, so one parsed ABI serves both.
var (
	tokenABI  = mustABI(testUSDCABI)
	walletABI = mustABI(testWalletABI)

	methodName               = tokenABI.Methods["name"]
	methodVersion            = tokenABI.Methods["version"]
	methodDecimals           = tokenABI.Methods["decimals"]
	methodBalanceOf          = tokenABI.Methods["balanceOf"]
	methodAuthorizationState = tokenABI.Methods["authorizationState"]
	methodMint               = tokenABI.Methods["mint"]
	methodTransfer           = tokenABI.Methods["transfer"]
	methodTransferVRS        = methodBySig(tokenABI, "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)")
	methodTransferBytes      = methodBySig(tokenABI, "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)")
	methodCancelVRS          = methodBySig(tokenABI, "cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)")
	eventTransfer            = tokenABI.Events["Transfer"]

	// isValidSignature(bytes32,bytes) of ERC-1271 and its magic return value.
	methodIsValidSignature = walletABI.Methods["isValidSignature"]
	erc1271Magic           = [4]byte{0x16, 0x26, 0xba, 0x7e}

	// erc6492Magic ends an ERC-6492 wrapped signature of a counterfactual wallet.
	erc6492Magic = common.FromHex("0x6492649264926492649264926492649264926492649264926492649264926492")
)

func mustABI(j string) abi.ABI {
	a, err := abi.JSON(strings.NewReader(j))
	if err != nil {
		panic(fmt.Sprintf("evm: embedded ABI: %v", err))
	}
	return a
}

// methodBySig finds an overloaded method by its canonical signature; the ABI
// package names overloads by declaration order, which is not stable.
func methodBySig(a abi.ABI, sig string) abi.Method {
	for _, m := range a.Methods {
		if m.Sig == sig {
			return m
		}
	}
	panic("evm: embedded ABI lacks " + sig)
}
