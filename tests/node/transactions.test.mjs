// Transactions with kafkajs (skipped unless LAMINAR_TEST_GROUPS=1): a transactional producer
// commits and aborts; a read_committed consumer (readUncommitted: false) reads exactly the
// committed records at their offsets, a read_uncommitted one the aborted ones too; offsets sent
// with sendOffsets become the group's committed offset only when the transaction commits; a
// second producer with the same transactional id fences the first. kafkajs sends the pre-KIP-588
// versions (InitProducerId v1, AddPartitionsToTxn v1, AddOffsetsToTxn v1, EndTxn v1), which must
// be told INVALID_PRODUCER_EPOCH: it does not know PRODUCER_FENCED (90).

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { withBroker } from './lib/broker.mjs'
import { createTopic, kafka, uniqueTopic, waitFor } from './lib/kafka.mjs'

const skip = process.env.LAMINAR_TEST_GROUPS === '1' ? false : 'needs transactions: set LAMINAR_TEST_GROUPS=1'

function transactionalProducer(client, transactionalId) {
  return client.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
}

/** Sends `values` round-robin over `partitions` in one transaction and resolves once the broker
 * acknowledged them (kafkajs sends on send() and resolves on the ack), so an abort that follows
 * drops records that are really in the log. Returns [partition, offset, value] per record. */
async function sendInTransaction(transaction, topic, values, partitions = 1) {
  const out = []
  for (const [i, value] of values.entries()) {
    const partition = i % partitions
    const [answer] = await transaction.send({ topic, acks: -1, messages: [{ value, partition }] })
    assert.equal(answer.errorCode, 0)
    assert.equal(answer.partition, partition)
    out.push([partition, Number(answer.baseOffset), value])
  }
  return out
}

/** Every record a new group member with `readUncommitted` reads of `topic` from the start, as
 * sorted [partition, offset, value], once `expected` records arrived. Records of a partition
 * arrive in offset order and each partition ends with committed records, so a consumer that
 * wrongly returned aborted records shows them before it reaches `expected`. */
async function readAll(client, topic, { readUncommitted, expected }) {
  const consumer = client.consumer({
    groupId: uniqueTopic('reader'), readUncommitted, maxWaitTimeInMs: 200, heartbeatInterval: 500,
  })
  const records = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push([partition, Number(message.offset), message.value.toString()])
      },
    })
    await waitFor(() => records.length >= expected, () => `${expected} records, got ${JSON.stringify(records)}`)
  } finally {
    await consumer.disconnect()
  }
  return records.sort(([p1, o1], [p2, o2]) => p1 - p2 || o1 - o2)
}

async function committedOffset(client, groupId, topic, partition) {
  const admin = client.admin()
  await admin.connect()
  try {
    const [found] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return found.partitions.find(p => p.partition === partition).offset
  } finally {
    await admin.disconnect()
  }
}

/** The end offsets ListOffsets gives for each partition of `topic` under both isolation levels,
 * as [high watermark (read_uncommitted), last stable offset (read_committed)]. kafkajs's
 * admin.fetchTopicOffsets asks read_committed only, so this goes through its cluster directly. */
async function highAndLastStable(client, topic) {
  const symbol = Object.getOwnPropertySymbols(client).find(s => s.description === 'private:Kafka:createCluster')
  assert.ok(symbol, 'kafkajs internals changed: createCluster symbol not found')
  const endOffsets = async isolationLevel => {
    const cluster = client[symbol]({ isolationLevel })
    await cluster.connect()
    try {
      await cluster.addTargetTopic(topic)
      const partitions = cluster.findTopicPartitionMetadata(topic).map(p => ({ partition: p.partitionId }))
      const [{ partitions: found }] = await cluster.fetchTopicsOffset([{ topic, fromBeginning: false, partitions }])
      return new Map(found.map(({ partition, offset }) => [partition, offset]))
    } finally {
      await cluster.disconnect()
    }
  }
  const [high, stable] = [await endOffsets(0), await endOffsets(1)]
  return [...high.keys()].sort((a, b) => a - b).map(p => [high.get(p), stable.get(p)])
}

const byPartitionOffset = (a, b) => a[0] - b[0] || a[1] - b[1]

describe('kafkajs transactions', { skip }, () => {
  it('read_committed reads exactly the committed transactions, read_uncommitted the aborted one too', () => withBroker(async broker => {
    const client = kafka(broker.bootstrap)
    const topic = uniqueTopic('txn-isolation')
    await createTopic(client, topic, 2)
    const producer = transactionalProducer(client, uniqueTopic('tx'))
    await producer.connect()
    const sent = []
    try {
      for (const [round, commit] of [[0, true], [1, false], [2, true]]) {
        const transaction = await producer.transaction()
        const values = Array.from({ length: 6 }, (_, i) => `r${round}-${i}`)
        sent.push(await sendInTransaction(transaction, topic, values, 2))
        await (commit ? transaction.commit() : transaction.abort())
      }
    } finally {
      await producer.disconnect()
    }
    // Three records per partition per transaction, then its marker: round r at offsets 4r..4r+2.
    sent.forEach((records, round) => {
      assert.deepEqual(records.map(([p, o]) => [p, o]).sort(byPartitionOffset),
        [0, 1].flatMap(p => [0, 1, 2].map(i => [p, 4 * round + i])), `offsets of round ${round}`)
    })
    const committed = [...sent[0], ...sent[2]].sort(byPartitionOffset)
    const every = sent.flat().sort(byPartitionOffset)
    assert.deepEqual(await readAll(client, topic, { readUncommitted: false, expected: committed.length }), committed)
    assert.deepEqual(await readAll(client, topic, { readUncommitted: true, expected: every.length }), every)
    assert.deepEqual(await highAndLastStable(client, topic), [['12', '12'], ['12', '12']])
  }))

  it('holds read_committed back while a transaction is open, then releases it on commit', () => withBroker(async broker => {
    const client = kafka(broker.bootstrap)
    const topic = uniqueTopic('txn-open')
    await createTopic(client, topic, 1)
    const producer = transactionalProducer(client, uniqueTopic('tx'))
    await producer.connect()
    try {
      const transaction = await producer.transaction()
      const sent = await sendInTransaction(transaction, topic, ['open-0', 'open-1'])
      assert.deepEqual(sent, [[0, 0, 'open-0'], [0, 1, 'open-1']])
      assert.deepEqual(await highAndLastStable(client, topic), [['2', '0']])
      await transaction.commit()
      assert.deepEqual(await highAndLastStable(client, topic), [['3', '3']])
      assert.deepEqual(await readAll(client, topic, { readUncommitted: false, expected: 2 }), sent)
    } finally {
      await producer.disconnect()
    }
  }))

  it('moves the group\'s committed offset with sendOffsets only when the transaction commits', () => withBroker(async broker => {
    const client = kafka(broker.bootstrap)
    const topic = uniqueTopic('txn-offsets')
    await createTopic(client, topic, 1)
    const groupId = uniqueTopic('group')
    const producer = transactionalProducer(client, uniqueTopic('tx'))
    await producer.connect()
    const offsetsAt = offset => ({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset }] }] })
    try {
      let transaction = await producer.transaction()
      await sendInTransaction(transaction, topic, ['a', 'b'])
      await transaction.sendOffsets(offsetsAt('5'))
      assert.equal(await committedOffset(client, groupId, topic, 0), '-1', 'a pending transactional offset was visible')
      await transaction.commit()
      assert.equal(await committedOffset(client, groupId, topic, 0), '5')

      transaction = await producer.transaction()
      await sendInTransaction(transaction, topic, ['c'])
      await transaction.sendOffsets(offsetsAt('9'))
      await transaction.abort()
      assert.equal(await committedOffset(client, groupId, topic, 0), '5')

      transaction = await producer.transaction()
      await transaction.sendOffsets(offsetsAt('7'))
      await transaction.commit()
      assert.equal(await committedOffset(client, groupId, topic, 0), '7')
    } finally {
      await producer.disconnect()
    }
    // 'a' and 'b' at 0-1, the commit marker at 2, the aborted 'c' at 3 and its marker at 4; the
    // last transaction touched no partition of the topic, so it wrote no marker there.
    assert.deepEqual(await highAndLastStable(client, topic), [['5', '5']])
  }))

  it('fences a producer when a second one initialises the same transactional id', () => withBroker(async broker => {
    const client = kafka(broker.bootstrap)
    const topic = uniqueTopic('txn-fence')
    await createTopic(client, topic, 1)
    const transactionalId = uniqueTopic('tx')
    const zombie = transactionalProducer(client, transactionalId)
    const successor = transactionalProducer(client, transactionalId)
    await zombie.connect()
    await successor.connect()
    try {
      const stale = await zombie.transaction()
      assert.deepEqual(await sendInTransaction(stale, topic, ['zombie']), [[0, 0, 'zombie']])
      // InitProducerId for the same id bumps the epoch and aborts the zombie's transaction.
      const fresh = await successor.transaction()
      await assert.rejects(stale.commit(), error => {
        assert.ok(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH'].includes(error.type), `${error.type}: ${error.message}`)
        return true
      })
      // The abort marker of the zombie's transaction is offset 1.
      assert.deepEqual(await sendInTransaction(fresh, topic, ['successor']), [[0, 2, 'successor']])
      await fresh.commit()
    } finally {
      await zombie.disconnect()
      await successor.disconnect()
    }
    assert.deepEqual(await readAll(client, topic, { readUncommitted: false, expected: 1 }), [[0, 2, 'successor']])
    assert.deepEqual(await readAll(client, topic, { readUncommitted: true, expected: 2 }), [[0, 0, 'zombie'], [0, 2, 'successor']])
  }))

  it('rejects a fenced producer\'s send and sendOffsets with an error kafkajs knows', () => withBroker(async broker => {
    const client = kafka(broker.bootstrap)
    const topic = uniqueTopic('txn-fenced-calls')
    await createTopic(client, topic, 1)
    const transactionalId = uniqueTopic('tx')
    const producers = [0, 1, 2].map(() => transactionalProducer(client, transactionalId))
    for (const producer of producers) await producer.connect()
    try {
      // Each InitProducerId bumps the epoch: the first two are fenced by the time they call.
      const [sending, offsetting, current] = [
        await producers[0].transaction(), await producers[1].transaction(), await producers[2].transaction(),
      ]
      const fenced = error => {
        assert.ok(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH'].includes(error.type), `${error.type}: ${error.message}`)
        return true
      }
      // AddPartitionsToTxn (v1 from kafkajs) before the produce.
      await assert.rejects(sending.send({ topic, acks: -1, messages: [{ value: 'stale', partition: 0 }] }), fenced)
      // AddOffsetsToTxn (v1 from kafkajs).
      await assert.rejects(offsetting.sendOffsets({
        consumerGroupId: uniqueTopic('group'), topics: [{ topic, partitions: [{ partition: 0, offset: '1' }] }],
      }), fenced)
      assert.deepEqual(await sendInTransaction(current, topic, ['current']), [[0, 0, 'current']])
      await current.commit()
    } finally {
      for (const producer of producers) await producer.disconnect()
    }
    assert.deepEqual(await highAndLastStable(client, topic), [['2', '2']])
  }))
})
