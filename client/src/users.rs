//! SCRAM users: AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554). The
//! caller salts and hashes the password (`laminar_security::ScramCredential::salted_password`);
//! only the salted password is sent.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use laminar_security::Mechanism;

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// One user's credential for one mechanism, as the broker lists it (never a salt or key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    pub user: String,
    /// `None` for a mechanism this client does not know.
    pub mechanism: Option<Mechanism>,
    pub iterations: i32,
}

impl Connection {
    /// Sets `user`'s credential for `mechanism` from a salted password (`Hi(password, salt,
    /// iterations)`).
    pub fn upsert_scram_user(
        &mut self,
        user: &str,
        mechanism: Mechanism,
        (salt, salted_password, iterations): (Vec<u8>, Vec<u8>, i32),
    ) -> Result<(), ClientError> {
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism.kafka_type())
            .with_iterations(iterations)
            .with_salt(salt.into())
            .with_salted_password(salted_password.into());
        self.alter_scram_users(AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]))
    }

    /// Deletes `user`'s credential for `mechanism`.
    pub fn delete_scram_user(&mut self, user: &str, mechanism: Mechanism) -> Result<(), ClientError> {
        let deletion = ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism.kafka_type());
        self.alter_scram_users(AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]))
    }

    fn alter_scram_users(&mut self, request: AlterUserScramCredentialsRequest) -> Result<(), ClientError> {
        let answer = self.request(&request)?;
        for result in answer.results {
            let message = result.error_message.as_ref().map(|m| m.to_string());
            let user = result.user.to_string();
            check_code(
                ApiKey::AlterUserScramCredentials,
                result.error_code,
                message.as_deref(),
                || format!(" user {user}"),
            )?;
        }
        Ok(())
    }

    /// Every SCRAM user's credentials.
    pub fn scram_users(&mut self) -> Result<Vec<ScramUser>, ClientError> {
        let answer = self.request(&DescribeUserScramCredentialsRequest::default())?;
        check_code(
            ApiKey::DescribeUserScramCredentials,
            answer.error_code,
            None,
            String::new,
        )?;
        let mut users = Vec::new();
        for result in answer.results {
            for info in result.credential_infos {
                users.push(ScramUser {
                    user: result.user.to_string(),
                    mechanism: Mechanism::from_kafka_type(info.mechanism),
                    iterations: info.iterations,
                });
            }
        }
        Ok(users)
    }
}
