// kafkajs 2.2.4 (never sends flexible versions) against a real laminar broker: topics (create
// with configs and validate-only, list, metadata, describe and alter configs, grow, delete,
// DescribeCluster), produce with keys, headers and timestamps and read everything back in order,
// every codec, offsets (earliest, latest, by timestamp) and reads from any offset, DeleteRecords,
// and kill -9 then restart keeping every acks=all record.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createRequire } from 'node:module'

import { BrokerProcess } from './lib/broker.mjs'
import {
  BASE_TIMESTAMP_MS, CompressionTypes, assertRecordsMatch, kafka, produce, readPartition, sampleRecords, uniqueTopic,
} from './lib/kafka.mjs'

const { ConfigResourceTypes } = createRequire(import.meta.url)('kafkajs')

describe('kafkajs against one broker', () => {
  let broker
  let client
  let admin
  let producer

  before(async () => {
    broker = await BrokerProcess.start()
    client = kafka(broker.bootstrap)
    admin = client.admin()
    await admin.connect()
    producer = client.producer({ idempotent: false, allowAutoTopicCreation: false })
    await producer.connect()
  })

  after(async () => {
    await producer?.disconnect()
    await admin?.disconnect()
    await broker?.stop()
  })

  async function createTopic(topic, numPartitions = 1, configEntries = []) {
    const created = await admin.createTopics({ topics: [{ topic, numPartitions, replicationFactor: 1, configEntries }] })
    assert.equal(created, true, `createTopics ${topic}`)
  }

  it('round-trips keys, headers, timestamps and order', async () => {
    const topic = uniqueTopic('roundtrip')
    await createTopic(topic)
    const records = sampleRecords(300)
    for (let start = 0; start < 300; start += 100) {
      assert.equal(await produce(producer, topic, 0, records.slice(start, start + 100)), start)
    }
    assertRecordsMatch(records, await readPartition(broker.bootstrap, topic, 0, 0, 300), 0)
  })

  it('creates, lists, describes, alters, grows and deletes topics', async () => {
    const topic = uniqueTopic('admin')
    // waitForLeaders would ask Metadata for the (not created) topic and fail: kafkajs's own rule.
    const dryRun = { validateOnly: true, waitForLeaders: false, topics: [{ topic, numPartitions: 2 }] }
    assert.equal(await admin.createTopics(dryRun), true)
    assert.ok(!(await admin.listTopics()).includes(topic), 'validateOnly created the topic')

    await createTopic(topic, 2, [{ name: 'retention.ms', value: '3600000' }])
    assert.ok((await admin.listTopics()).includes(topic))
    const { topics: [meta] } = await admin.fetchTopicMetadata({ topics: [topic] })
    assert.deepEqual(meta.partitions.map(p => p.partitionId).sort(), [0, 1])
    // kafkajs answers false (not an error) for TOPIC_ALREADY_EXISTS.
    assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] }), false)

    const describe = async () => {
      const { resources: [resource] } = await admin.describeConfigs({
        includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
      })
      assert.equal(resource.errorCode, 0)
      return Object.fromEntries(resource.configEntries.map(e => [e.configName, e]))
    }
    let configs = await describe()
    assert.equal(configs['retention.ms'].configValue, '3600000')
    assert.equal(configs['retention.ms'].isDefault, false)
    assert.equal(configs['cleanup.policy'].configValue, 'delete')
    assert.equal(configs['segment.bytes'].configValue, '1073741824')

    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
    })
    configs = await describe()
    assert.equal(configs['retention.ms'].configValue, '7200000')

    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] })
    const { topics: [grown] } = await admin.fetchTopicMetadata({ topics: [topic] })
    assert.deepEqual(grown.partitions.map(p => p.partitionId).sort(), [0, 1, 2])

    await admin.deleteTopics({ topics: [topic] })
    assert.ok(!(await admin.listTopics()).includes(topic), 'deleted topic still listed')
  })

  it('describes the cluster as this one broker', async () => {
    const cluster = await admin.describeCluster()
    assert.equal(cluster.brokers.length, 1)
    const [node] = cluster.brokers
    assert.equal(`${node.host}:${node.port}`, broker.bootstrap)
    assert.equal(cluster.controller, node.nodeId)
    assert.ok(cluster.clusterId)
  })

  for (const [name, codec] of Object.entries({
    none: CompressionTypes.None,
    gzip: CompressionTypes.GZIP,
    snappy: CompressionTypes.Snappy,
    lz4: CompressionTypes.LZ4,
    zstd: CompressionTypes.ZSTD,
  })) {
    it(`round-trips ${name} batches`, async () => {
      const topic = uniqueTopic(`codec-${name}`)
      await createTopic(topic)
      const records = sampleRecords(300, { compressible: true })
      assert.equal(await produce(producer, topic, 0, records.slice(0, 150), { compression: codec }), 0)
      assert.equal(await produce(producer, topic, 0, records.slice(150), { compression: codec }), 150)
      assertRecordsMatch(records, await readPartition(broker.bootstrap, topic, 0, 0, 300), 0)
    })
  }

  it('reports offsets by position and timestamp, and reads from any offset', async () => {
    const topic = uniqueTopic('offsets')
    await createTopic(topic)
    const records = sampleRecords(100)
    assert.equal(await produce(producer, topic, 0, records.slice(0, 60)), 0)
    assert.equal(await produce(producer, topic, 0, records.slice(60)), 60)
    const [offsets] = await admin.fetchTopicOffsets(topic)
    assert.deepEqual([offsets.low, offsets.high, offsets.offset], ['0', '100', '100'])
    const at = async ms => Number((await admin.fetchTopicOffsetsByTimestamp(topic, ms))[0].offset)
    assert.equal(await at(BASE_TIMESTAMP_MS + 41_500), 42)
    assert.equal(await at(BASE_TIMESTAMP_MS - 1), 0)
    assert.equal(await at(BASE_TIMESTAMP_MS + 1e6), 100) // kafkajs maps "none" (-1) to the high watermark
    // From inside a batch, and from a timestamp lookup.
    assertRecordsMatch(records.slice(57), await readPartition(broker.bootstrap, topic, 0, 57, 43), 57)
    const fromTime = await at(BASE_TIMESTAMP_MS + 90_000)
    assertRecordsMatch(records.slice(90), await readPartition(broker.bootstrap, topic, 0, fromTime, 10), 90)
  })

  it('moves the low watermark with DeleteRecords', async () => {
    const topic = uniqueTopic('delete-records')
    await createTopic(topic)
    const records = sampleRecords(50)
    await produce(producer, topic, 0, records)
    // kafkajs finds the leader from cached metadata only; fetching offsets first loads it.
    const [before] = await admin.fetchTopicOffsets(topic)
    assert.deepEqual([before.low, before.high], ['0', '50'])
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '20' }] })
    const [offsets] = await admin.fetchTopicOffsets(topic)
    assert.deepEqual([offsets.low, offsets.high], ['20', '50'])
    assertRecordsMatch(records.slice(20), await readPartition(broker.bootstrap, topic, 0, 20, 30), 20)
  })
})

describe('kafkajs across kill -9', () => {
  it('keeps every acks=all record after kill -9 and restart', async () => {
    const broker = await BrokerProcess.start()
    try {
      const topic = uniqueTopic('kill9')
      const records = sampleRecords(1000)
      {
        const client = kafka(broker.bootstrap)
        const admin = client.admin()
        await admin.connect()
        await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }] })
        await admin.disconnect()
        const producer = client.producer({ idempotent: false })
        await producer.connect()
        for (let start = 0; start < 1000; start += 250) {
          const chunk = records.slice(start, start + 250)
          assert.equal(await produce(producer, topic, 0, chunk), start)
          assert.equal(await produce(producer, topic, 1, chunk, { compression: CompressionTypes.GZIP }), start)
        }
        await producer.disconnect()
      }
      await broker.kill9()
      await broker.restart()
      for (const partition of [0, 1]) {
        assertRecordsMatch(records, await readPartition(broker.bootstrap, topic, partition, 0, 1000), 0)
      }
    } finally {
      await broker.stop()
    }
  })
})
