// kafkajs 2.2.4 against a three-node cluster in combined mode: a topic with replication factor 3
// gets leaders on all three brokers, the cluster and topic metadata name every broker with its
// real endpoint, and records produced with acks=1 reach every partition through its leader.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'

import { BrokerProcess } from './lib/broker.mjs'
import { kafka, uniqueTopic } from './lib/kafka.mjs'

const PARTITIONS = 6

describe('kafkajs against a three-node cluster', () => {
  let cluster
  let client
  let admin

  before(async () => {
    cluster = await BrokerProcess.start({ cluster: 3 })
    client = kafka(cluster.bootstrap)
    admin = client.admin()
    await admin.connect()
  })

  after(async () => {
    await admin?.disconnect()
    await cluster?.stop()
  })

  it('spreads leaders over the three brokers and routes produce to them', async () => {
    const topic = uniqueTopic('cluster')
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 3 }] })
    assert.equal(created, true)

    const described = await admin.describeCluster()
    const endpoints = described.brokers.map(b => `${b.host}:${b.port}`).sort()
    assert.deepEqual(endpoints, cluster.bootstrap.split(',').sort(), 'real endpoints')
    assert.deepEqual(described.brokers.map(b => b.nodeId).sort(), [1, 2, 3])

    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
    const partitions = topics[0].partitions
    assert.equal(partitions.length, PARTITIONS)
    assert.deepEqual([...new Set(partitions.map(p => p.leader))].sort(), [1, 2, 3], JSON.stringify(partitions))
    for (const p of partitions) assert.deepEqual([...p.replicas].sort(), [1, 2, 3])

    const producer = client.producer({ idempotent: false, allowAutoTopicCreation: false })
    await producer.connect()
    try {
      for (let partition = 0; partition < PARTITIONS; partition++) {
        const [answer] = await producer.send({ topic, acks: 1, messages: [{ partition, value: `to-${partition}` }] })
        assert.equal(answer.errorCode, 0)
        assert.equal(answer.baseOffset, '0')
      }
    } finally {
      await producer.disconnect()
    }
  })
})
