// kafkajs set-up shared by the Node suites: every codec registered, test records with the awkward
// cases, a group-free partition reader, and a record comparison that names the first difference.

import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

// snappy: kafkajs-snappy (snappyjs, pure JS). lz4: kafkajs-lz4 depends on the `lz4` package,
// whose tarball ships macOS binaries and needs a node-gyp build, so this wraps lz4js (pure JS,
// LZ4 frame format as Kafka uses). zstd: @kafkajs/zstd needs a native build that fails on
// Node 20, so this wraps zstd-codec (Emscripten, no native code).
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) { return Buffer.from(lz4.compress(encoder.buffer)) },
  async decompress(buffer) { return Buffer.from(lz4.decompress(buffer)) },
})
const zstdStreaming = new Promise(resolve => ZstdCodec.run(zstd => resolve(new zstd.Streaming())))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) { return Buffer.from((await zstdStreaming).compress(encoder.buffer, 3)) },
  async decompress(buffer) { return Buffer.from((await zstdStreaming).decompress(buffer)) },
})

export { CompressionTypes }
export const BASE_TIMESTAMP_MS = 1_700_000_000_000

export function kafka(bootstrap) {
  return new Kafka({
    clientId: 'laminar-node-tests',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: 10_000,
    requestTimeout: 15_000,
    retry: { retries: 3, initialRetryTime: 200 },
  })
}

/** Creates `topic` with `numPartitions` partitions (replication factor 1) through the admin API. */
export async function createTopic(client, topic, numPartitions) {
  const admin = client.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions, replicationFactor: 1 }] })
  await admin.disconnect()
}

/** Waits until `predicate()` holds; `what` (a string, or a function giving one) says what was
 * awaited when it never does. */
export async function waitFor(predicate, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${typeof what === 'function' ? what() : what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

export function uniqueTopic(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`
}

/** Records with null keys, null values, binary bytes and several headers. */
export function sampleRecords(count, { compressible = false } = {}) {
  return Array.from({ length: count }, (_, i) => {
    let value
    if (i % 17 === 5) value = null
    else if (compressible) value = Buffer.from(`${i}:` + 'laminar compresses well '.repeat(20))
    else if (i % 17 === 11) value = Buffer.from(Array.from({ length: 4096 + i }, (_, j) => (i + j) % 256))
    else value = Buffer.from(`value-${i}-` + 'x'.repeat(i % 50))
    const headers = { index: Buffer.from(String(i)) }
    if (i % 4 === 0) headers.binary = Buffer.from([0, 1, 2, 255])
    return {
      key: i % 10 === 3 ? null : Buffer.from(`key-${String(i).padStart(5, '0')}`),
      value,
      headers,
      timestamp: String(BASE_TIMESTAMP_MS + i * 1000),
    }
  })
}

/** Sends records to one partition in one request; returns the acked base offset. */
export async function produce(producer, topic, partition, records, { compression, acks = -1 } = {}) {
  const [answer] = await producer.send({
    topic, acks, compression, messages: records.map(r => ({ ...r, partition })),
  })
  assert.equal(answer.errorCode, 0)
  assert.equal(answer.partition, partition)
  return Number(answer.baseOffset)
}

function privateCluster(client) {
  const symbol = Object.getOwnPropertySymbols(client)
    .find(s => s.description === 'private:Kafka:createCluster')
  assert.ok(symbol, 'kafkajs internals changed: createCluster symbol not found')
  return client[symbol]({})
}

/**
 * Reads `count` records of one partition from `offset` through kafkajs's own Fetch encoder and
 * decoder (the path its consumer uses), without a consumer group: kafkajs has no assign().
 */
export async function readPartition(bootstrap, topic, partition, offset, count) {
  const cluster = privateCluster(kafka(bootstrap))
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const leader = cluster.findTopicPartitionMetadata(topic).find(p => p.partitionId === partition).leader
    const broker = await cluster.findBroker({ nodeId: leader })
    const out = []
    let next = offset
    const deadline = Date.now() + 15_000
    while (out.length < count) {
      assert.ok(Date.now() < deadline, `only ${out.length} of ${count} records arrived`)
      const response = await broker.fetch({
        maxWaitTime: 200, minBytes: 1, maxBytes: 8 << 20, isolationLevel: 0,
        topics: [{ topic, partitions: [{ partition, fetchOffset: String(next), maxBytes: 8 << 20 }] }],
      })
      const data = response.responses[0].partitions[0]
      assert.equal(data.errorCode, 0, `fetch error ${data.errorCode}`)
      // A fetch returns whole batches: drop records before the requested offset, as the consumer does.
      for (const message of data.messages) {
        if (Number(message.offset) >= next && out.length < count) out.push(message)
      }
      if (out.length) next = Number(out[out.length - 1].offset) + 1
    }
    return out
  } finally {
    await cluster.disconnect()
  }
}

export function assertRecordsMatch(expected, consumed, firstOffset) {
  assert.equal(consumed.length, expected.length, 'record count')
  expected.forEach((want, i) => {
    const got = consumed[i]
    assert.equal(Number(got.offset), firstOffset + i, `offset of record ${i}`)
    assert.deepEqual(got.key, want.key, `key of record ${i}`)
    assert.deepEqual(got.value, want.value, `value of record ${i}`)
    assert.deepEqual(got.headers, want.headers, `headers of record ${i}`)
    assert.equal(got.timestamp, want.timestamp, `timestamp of record ${i}`)
  })
}
