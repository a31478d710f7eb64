package evm

import (
	"context"
	"errors"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// RPC metrics, registered with the default registerer (see web's Metrics
// comment).
var (
	rpcDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ardx_rpc_request_duration_seconds",
		Help:    "JSON-RPC calls to a network's node, by network and method, and how long they took.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"network", "method"})
	rpcErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ardx_rpc_errors_total",
		Help: "JSON-RPC calls that failed, by network and method (a receipt not found yet is not a failure).",
	}, []string{"network", "method"})
)

// meteredBackend observes every call of a Backend in the RPC metrics.
type meteredBackend struct {
	b       Backend
	network string
}

func (m meteredBackend) observe(method string, start time.Time, err error) {
	rpcDuration.WithLabelValues(m.network, method).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, ethereum.NotFound) {
		rpcErrors.WithLabelValues(m.network, method).Inc()
	}
}

func (m meteredBackend) ChainID(ctx context.Context) (*big.Int, error) {
	start := time.Now()
	v, err := m.b.ChainID(ctx)
	m.observe("eth_chainId", start, err)
	return v, err
}

func (m meteredBackend) CallContract(ctx context.Context, call ethereum.CallMsg, block *big.Int) ([]byte, error) {
	start := time.Now()
	v, err := m.b.CallContract(ctx, call, block)
	m.observe("eth_call", start, err)
	return v, err
}

func (m meteredBackend) EstimateGas(ctx context.Context, call ethereum.CallMsg) (uint64, error) {
	start := time.Now()
	v, err := m.b.EstimateGas(ctx, call)
	m.observe("eth_estimateGas", start, err)
	return v, err
}

func (m meteredBackend) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	start := time.Now()
	err := m.b.SendTransaction(ctx, tx)
	m.observe("eth_sendRawTransaction", start, err)
	return err
}

func (m meteredBackend) CodeAt(ctx context.Context, account common.Address, block *big.Int) ([]byte, error) {
	start := time.Now()
	v, err := m.b.CodeAt(ctx, account, block)
	m.observe("eth_getCode", start, err)
	return v, err
}

func (m meteredBackend) BalanceAt(ctx context.Context, account common.Address, block *big.Int) (*big.Int, error) {
	start := time.Now()
	v, err := m.b.BalanceAt(ctx, account, block)
	m.observe("eth_getBalance", start, err)
	return v, err
}

func (m meteredBackend) NonceAt(ctx context.Context, account common.Address, block *big.Int) (uint64, error) {
	start := time.Now()
	v, err := m.b.NonceAt(ctx, account, block)
	m.observe("eth_getTransactionCount", start, err)
	return v, err
}

func (m meteredBackend) PendingNonceAt(ctx context.Context, account common.Address) (uint64, error) {
	start := time.Now()
	v, err := m.b.PendingNonceAt(ctx, account)
	m.observe("eth_getTransactionCount", start, err)
	return v, err
}

func (m meteredBackend) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	start := time.Now()
	v, err := m.b.SuggestGasTipCap(ctx)
	m.observe("eth_maxPriorityFeePerGas", start, err)
	return v, err
}

func (m meteredBackend) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	start := time.Now()
	v, err := m.b.HeaderByNumber(ctx, number)
	m.observe("eth_getBlockByNumber", start, err)
	return v, err
}

func (m meteredBackend) TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	start := time.Now()
	v, err := m.b.TransactionReceipt(ctx, hash)
	m.observe("eth_getTransactionReceipt", start, err)
	return v, err
}

func (m meteredBackend) TransactionByHash(ctx context.Context, hash common.Hash) (*types.Transaction, bool, error) {
	start := time.Now()
	v, pending, err := m.b.TransactionByHash(ctx, hash)
	m.observe("eth_getTransactionByHash", start, err)
	return v, pending, err
}

// rawClient is implemented by *ethclient.Client and the simulated backend's
// client: the JSON-RPC client under them, which sends batches.
type rawClient interface{ Client() *rpc.Client }

// SendTransactions sends txs in one JSON-RPC batch of eth_sendRawTransaction,
// in order (a node answers a batch's calls one after the other), and
// returns one error per transaction; err is the batch's own failure, when
// nothing is known of any transaction. A backend without a JSON-RPC client
// sends them one by one. The batch is observed once, as
// eth_sendRawTransaction_batch.
func (m meteredBackend) SendTransactions(ctx context.Context, txs []*types.Transaction) ([]error, error) {
	rc, ok := m.b.(rawClient)
	if !ok || rc.Client() == nil {
		errs := make([]error, len(txs))
		for i, tx := range txs {
			errs[i] = m.SendTransaction(ctx, tx)
		}
		return errs, nil
	}
	start := time.Now()
	batch := make([]rpc.BatchElem, len(txs))
	for i, tx := range txs {
		raw, err := tx.MarshalBinary()
		if err != nil {
			return nil, err
		}
		batch[i] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Encode(raw)}, Result: new(common.Hash)}
	}
	err := rc.Client().BatchCallContext(ctx, batch)
	m.observe("eth_sendRawTransaction_batch", start, err)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(txs))
	for i, b := range batch {
		errs[i] = b.Error
		if b.Error != nil {
			rpcErrors.WithLabelValues(m.network, "eth_sendRawTransaction").Inc()
		}
	}
	return errs, nil
}

// BlockNumber reads the number of the node's latest block: eth_blockNumber
// where the backend has it, else the latest header's number.
func (m meteredBackend) BlockNumber(ctx context.Context) (uint64, error) {
	start := time.Now()
	if bn, ok := m.b.(interface {
		BlockNumber(context.Context) (uint64, error)
	}); ok {
		v, err := bn.BlockNumber(ctx)
		m.observe("eth_blockNumber", start, err)
		return v, err
	}
	h, err := m.HeaderByNumber(ctx, nil)
	if err != nil {
		return 0, err
	}
	return h.Number.Uint64(), nil
}

// TransactionReceipts reads the receipts of hashes in one JSON-RPC batch of
// eth_getTransactionReceipt and returns one receipt (nil while the
// transaction is not mined) and one error per hash; err is the batch's own
// failure. A backend without a JSON-RPC client asks one by one. The batch is
// observed once, as eth_getTransactionReceipt_batch.
func (m meteredBackend) TransactionReceipts(ctx context.Context, hashes []common.Hash) ([]*types.Receipt, []error, error) {
	rs, errs := make([]*types.Receipt, len(hashes)), make([]error, len(hashes))
	rc, ok := m.b.(rawClient)
	if !ok || rc.Client() == nil {
		for i, h := range hashes {
			rs[i], errs[i] = m.TransactionReceipt(ctx, h)
			if errors.Is(errs[i], ethereum.NotFound) {
				errs[i] = nil
			}
		}
		return rs, errs, nil
	}
	start := time.Now()
	batch := make([]rpc.BatchElem, len(hashes))
	for i, h := range hashes {
		batch[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{h}, Result: &rs[i]}
	}
	err := rc.Client().BatchCallContext(ctx, batch)
	m.observe("eth_getTransactionReceipt_batch", start, err)
	if err != nil {
		return nil, nil, err
	}
	for i, b := range batch {
		errs[i] = b.Error
		if b.Error != nil {
			rpcErrors.WithLabelValues(m.network, "eth_getTransactionReceipt").Inc()
		}
	}
	return rs, errs, nil
}
