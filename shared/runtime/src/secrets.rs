//! Secrets kept in AWS instead of the environment. `secrets:` in `clawless.yaml` gives names
//! (the ones `…Env` keys use, e.g. `botTokenEnv: TELEGRAM_BOT_TOKEN`) a source: an SSM
//! Parameter Store parameter (a `SecureString`, decrypted) or a Secrets Manager secret,
//! optionally one key of its JSON. They are fetched once, at start-up, and then looked up
//! before the process environment, so every `…Env` key can name one:
//!
//! ```yaml
//! secrets:
//!   TELEGRAM_BOT_TOKEN: {ssm: /clawless/telegram/bot-token}
//!   SLACK_SIGNING_SECRET: {secretsManager: clawless/slack, key: signingSecret}
//! ```
//!
//! The same entries may also come from the environment variable [`SECRETS_ENV`] as JSON
//! (`{"CLAWLESS_ADMIN_TOKEN": {"secretsManager": "arn:…"}}`): that is how the SAM template
//! hands each function the secrets it created, so no secret is ever a plain environment
//! value. A name in both keeps the file's entry.
//!
//! Values never reach a log: [`SecretValues`] shows only names.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// Environment variable holding more `secrets:` entries, as a JSON object.
pub const SECRETS_ENV: &str = "CLAWLESS_SECRETS";

/// Where one secret is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SecretSource {
    /// An SSM Parameter Store parameter name (e.g. `/clawless/telegram/bot-token`), read
    /// with decryption. Set exactly one of `ssm` and `secretsManager`.
    pub ssm: Option<String>,
    /// A Secrets Manager secret name or ARN (e.g. `clawless/slack`). Set exactly one of
    /// `ssm` and `secretsManager`.
    pub secrets_manager: Option<String>,
    /// With `secretsManager`: the key to take from the secret's JSON object; unset, the
    /// whole secret string is the value.
    pub key: Option<String>,
}

/// Why the secrets could not be fetched (start-up fails: a function without its secrets
/// cannot verify or answer anything).
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// A `secrets:` entry is not exactly one source.
    #[error("secrets.{name}: {reason}")]
    Invalid {
        /// The name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// [`SECRETS_ENV`] is not a JSON object of sources.
    #[error("CLAWLESS_SECRETS: {0}")]
    Env(String),
    /// The store refused or could not be reached.
    #[error("secrets.{name}: {message}")]
    Fetch {
        /// The name.
        name: String,
        /// What failed (the store's error, never the value).
        message: String,
    },
}

/// Fetched secret values by name. `Debug` shows the names only.
#[derive(Clone, Default)]
pub struct SecretValues(BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl FromIterator<(String, String)> for SecretValues {
    fn from_iter<T: IntoIterator<Item = (String, String)>>(values: T) -> Self {
        Self(values.into_iter().collect())
    }
}

impl SecretValues {
    /// The value fetched for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These values and `more`'s; a name in both takes `more`'s value.
    pub fn with(mut self, more: SecretValues) -> SecretValues {
        self.0.extend(more.0);
        self
    }

    /// A value an `…Env` key names: the fetched secret when there is one (and it is not
    /// blank), else the process environment (when not blank).
    pub fn lookup(&self, name: &str) -> Option<String> {
        let not_blank = |value: &String| !value.trim().is_empty();
        self.get(name)
            .map(str::to_owned)
            .filter(not_blank)
            .or_else(|| std::env::var(name).ok().filter(not_blank))
    }
}

/// Fetches `sources` with the machine's own AWS configuration (credentials, region and
/// endpoint from the environment or `~/.aws`), for `clawless local` and operator commands.
/// Loads nothing from AWS when there are no sources.
pub async fn fetch_with_ambient_aws(
    sources: &BTreeMap<String, SecretSource>,
) -> Result<SecretValues, SecretsError> {
    if sources.is_empty() {
        return Ok(SecretValues::default());
    }
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    fetch_secrets(sources, &SecretClients::new(&shared)).await
}

/// The clients secrets are fetched with, each built the first time it is used: building an
/// SDK client costs a cold start a few hundred microseconds, and the template keeps every
/// secret in Secrets Manager, so the SSM client is never built there.
#[derive(Debug, Clone)]
pub struct SecretClients {
    sdk: aws_config::SdkConfig,
    ssm: OnceLock<aws_sdk_ssm::Client>,
    secrets_manager: OnceLock<aws_sdk_secretsmanager::Client>,
}

impl SecretClients {
    /// Clients from a loaded AWS configuration (built when first used).
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self {
            sdk: sdk.clone(),
            ssm: OnceLock::new(),
            secrets_manager: OnceLock::new(),
        }
    }

    /// Uses `client` for SSM Parameter Store (e.g. one with an interceptor).
    pub fn with_ssm(self, client: aws_sdk_ssm::Client) -> Self {
        Self {
            ssm: OnceLock::from(client),
            ..self
        }
    }

    /// Uses `client` for Secrets Manager.
    pub fn with_secrets_manager(self, client: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            secrets_manager: OnceLock::from(client),
            ..self
        }
    }

    /// The SSM Parameter Store client.
    pub fn ssm(&self) -> &aws_sdk_ssm::Client {
        self.ssm.get_or_init(|| aws_sdk_ssm::Client::new(&self.sdk))
    }

    /// The Secrets Manager client.
    pub fn secrets_manager(&self) -> &aws_sdk_secretsmanager::Client {
        self.secrets_manager
            .get_or_init(|| aws_sdk_secretsmanager::Client::new(&self.sdk))
    }
}

/// Parses the value of [`SECRETS_ENV`]: a JSON object from names to sources, in the shape
/// of `secrets:`.
pub fn parse_env_sources(json: &str) -> Result<BTreeMap<String, SecretSource>, SecretsError> {
    serde_json::from_str(json).map_err(|err| SecretsError::Env(err.to_string()))
}

/// The entries of `file` (the `secrets:` section) and `env` (from [`SECRETS_ENV`]) together;
/// a name in both keeps the file's entry, so an operator can point a name elsewhere.
pub fn merge_sources(
    file: &BTreeMap<String, SecretSource>, env: BTreeMap<String, SecretSource>,
) -> BTreeMap<String, SecretSource> {
    let mut merged = env;
    for (name, source) in file {
        merged.insert(name.clone(), source.clone());
    }
    merged
}

/// Takes the entries `names` name out of `sources`.
pub fn take_entries(
    sources: &mut BTreeMap<String, SecretSource>, names: &[&str],
) -> BTreeMap<String, SecretSource> {
    names
        .iter()
        .filter_map(|name| sources.remove_entry(*name))
        .collect()
}

/// One secret read when asked for instead of at start-up, for a value only a rarely taken
/// path needs (the operator routes' token): the cold starts that never take the path read
/// nothing. The entry is checked when this is made; the caller keeps what it reads.
#[derive(Debug, Clone)]
pub struct SecretOnDemand {
    name: String,
    source: SecretSource,
    clients: SecretClients,
}

impl SecretOnDemand {
    /// The secret `source` names for `name`; an entry with no or two sources is refused now.
    pub fn new(
        name: impl Into<String>, source: SecretSource, clients: SecretClients,
    ) -> Result<Self, SecretsError> {
        let name = name.into();
        Stored::of(&name, &source)?;
        Ok(Self {
            name,
            source,
            clients,
        })
    }

    /// The name it is looked up by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads the value from its store (one request each call).
    pub async fn read(&self) -> Result<String, SecretsError> {
        let sources = BTreeMap::from([(self.name.clone(), self.source.clone())]);
        let SecretValues(mut values) = fetch_secrets(&sources, &self.clients).await?;
        values
            .remove(&self.name)
            .ok_or_else(|| SecretsError::Fetch {
                name: self.name.clone(),
                message: "no value returned".to_owned(),
            })
    }
}

/// Where a value is read from: one request each, however many names use it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Stored {
    Parameter(String),
    Secret(String),
}

impl Stored {
    fn of(name: &str, source: &SecretSource) -> Result<Self, SecretsError> {
        let invalid = |reason: &str| SecretsError::Invalid {
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        match (&source.ssm, &source.secrets_manager) {
            (Some(_), Some(_)) | (None, None) => {
                Err(invalid("give exactly one of `ssm` and `secretsManager`"))
            }
            (Some(_), None) if source.key.is_some() => {
                Err(invalid("`key` goes with `secretsManager`, not `ssm`"))
            }
            (Some(parameter), None) => Ok(Self::Parameter(parameter.clone())),
            (None, Some(secret_id)) => Ok(Self::Secret(secret_id.clone())),
        }
    }

    /// The stored text, or what went wrong (the store's error, never a value).
    async fn read(&self, clients: &SecretClients) -> Result<String, String> {
        match self {
            Self::Parameter(parameter) => {
                let output = clients
                    .ssm()
                    .get_parameter()
                    .name(parameter)
                    .with_decryption(true)
                    .send()
                    .await
                    .map_err(|err| {
                        format!(
                            "SSM parameter {parameter}: {}",
                            aws_sdk_ssm::error::DisplayErrorContext(err)
                        )
                    })?;
                output
                    .parameter()
                    .and_then(|parameter| parameter.value())
                    .map(str::to_owned)
                    .ok_or_else(|| format!("SSM parameter {parameter} has no value"))
            }
            Self::Secret(secret_id) => {
                let output = clients
                    .secrets_manager()
                    .get_secret_value()
                    .secret_id(secret_id)
                    .send()
                    .await
                    .map_err(|err| {
                        format!(
                            "secret {secret_id}: {}",
                            aws_sdk_secretsmanager::error::DisplayErrorContext(err)
                        )
                    })?;
                output
                    .secret_string()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("secret {secret_id} is not a string"))
            }
        }
    }
}

/// The most names one `GetParameters` request takes.
const PARAMETERS_PER_REQUEST: usize = 10;
/// The most ids one `BatchGetSecretValue` request takes.
const SECRETS_PER_REQUEST: usize = 20;

/// Fetches every secret `sources` names. Each parameter or secret is read once, however many
/// names use it (the model keys share one secret); two or more from one store are read in one
/// request (`GetParameters`, `BatchGetSecretValue`), and the stores are read at once, so a
/// cold start waits for one round trip (and one TLS handshake) per store. A value a batch does
/// not return (a partial ARN, a version selector, a refused batch) is read on its own, which
/// also gives a missing one its store's own error.
pub async fn fetch_secrets(
    sources: &BTreeMap<String, SecretSource>, clients: &SecretClients,
) -> Result<SecretValues, SecretsError> {
    let mut wanted = BTreeMap::new();
    for (name, source) in sources {
        wanted.insert(
            name.as_str(),
            (Stored::of(name, source)?, source.key.as_deref()),
        );
    }
    let mut distinct: Vec<&Stored> = wanted.values().map(|(stored, _)| stored).collect();
    distinct.sort();
    distinct.dedup();
    let read = read_all(&distinct, clients).await;
    let mut values = BTreeMap::new();
    for (name, (stored, key)) in &wanted {
        let failed = |message: String| SecretsError::Fetch {
            name: (*name).to_owned(),
            message,
        };
        let text = read[stored]
            .as_ref()
            .map_err(|message| failed(message.clone()))?;
        let value = match (stored, key) {
            (Stored::Secret(secret_id), Some(key)) => {
                serde_json::from_str::<serde_json::Value>(text)
                    .ok()
                    .and_then(|json| json.get(key)?.as_str().map(str::to_owned))
                    .ok_or_else(|| {
                        failed(format!(
                            "secret {secret_id} is not a JSON object with a string {key:?}"
                        ))
                    })?
            }
            _ => text.clone(),
        };
        values.insert((*name).to_owned(), value);
    }
    Ok(SecretValues(values))
}

/// Reads each of `stored`: batched per store where two or more share it, then one by one
/// for whatever a batch did not return.
async fn read_all<'a>(
    stored: &[&'a Stored], clients: &SecretClients,
) -> BTreeMap<&'a Stored, Result<String, String>> {
    let parameters: Vec<&str> = stored
        .iter()
        .filter_map(|stored| match stored {
            Stored::Parameter(name) => Some(name.as_str()),
            Stored::Secret(_) => None,
        })
        .collect();
    let secrets: Vec<&str> = stored
        .iter()
        .filter_map(|stored| match stored {
            Stored::Secret(id) => Some(id.as_str()),
            Stored::Parameter(_) => None,
        })
        .collect();
    let (parameter_values, secret_values) = futures_util::future::join(
        batch_read_parameters(&parameters, clients),
        batch_read_secrets(&secrets, clients),
    )
    .await;
    let mut read = BTreeMap::new();
    let mut alone = Vec::new();
    for &each in stored {
        let batched = match each {
            Stored::Parameter(name) => parameter_values.get(name.as_str()),
            Stored::Secret(id) => secret_values.get(id.as_str()),
        };
        match batched {
            Some(value) => {
                read.insert(each, Ok(value.clone()));
            }
            None => alone.push(each),
        }
    }
    let reads = futures_util::future::join_all(alone.iter().map(|each| each.read(clients))).await;
    read.extend(alone.into_iter().zip(reads));
    read
}

/// The values of `names` one `GetParameters` request per ten returns, by the name asked
/// for; nothing when fewer than two are wanted (one is a plain `GetParameter`). A failed
/// request returns nothing, and its names are then read one by one.
async fn batch_read_parameters<'a>(
    names: &[&'a str], clients: &SecretClients,
) -> BTreeMap<&'a str, String> {
    if names.len() < 2 {
        return BTreeMap::new();
    }
    let ssm = clients.ssm();
    let requests = names.chunks(PARAMETERS_PER_REQUEST).map(|chunk| {
        ssm.get_parameters()
            .set_names(Some(chunk.iter().map(|&name| name.to_owned()).collect()))
            .with_decryption(true)
            .send()
    });
    let outputs = futures_util::future::join_all(requests).await;
    values_by_asked_id(names, outputs, "GetParameters", |output| {
        output
            .parameters()
            .iter()
            .map(|parameter| ReturnedValue {
                name: parameter.name(),
                arn: parameter.arn(),
                value: parameter.value(),
            })
            .collect()
    })
}

/// The values of `ids` one `BatchGetSecretValue` request per twenty returns, by the id asked
/// for (a name or a full ARN); nothing when fewer than two are wanted. A failed request
/// (e.g. a role without `secretsmanager:BatchGetSecretValue`) returns nothing, and its ids are
/// then read one by one.
async fn batch_read_secrets<'a>(
    ids: &[&'a str], clients: &SecretClients,
) -> BTreeMap<&'a str, String> {
    if ids.len() < 2 {
        return BTreeMap::new();
    }
    let secrets_manager = clients.secrets_manager();
    let requests = ids.chunks(SECRETS_PER_REQUEST).map(|chunk| {
        secrets_manager
            .batch_get_secret_value()
            .set_secret_id_list(Some(chunk.iter().map(|&id| id.to_owned()).collect()))
            .send()
    });
    let outputs = futures_util::future::join_all(requests).await;
    values_by_asked_id(ids, outputs, "BatchGetSecretValue", |output| {
        output
            .secret_values()
            .iter()
            .map(|secret| ReturnedValue {
                name: secret.name(),
                arn: secret.arn(),
                value: secret.secret_string(),
            })
            .collect()
    })
}

/// One value a batch read returned, with the name and ARN it came back under.
struct ReturnedValue<'o> {
    name: Option<&'o str>,
    arn: Option<&'o str>,
    value: Option<&'o str>,
}

/// The values the batch `request`'s `outputs` returned, by the id in `asked` (a name or an
/// ARN) each answers; a failed request is logged and skipped, so its ids are read one by one.
fn values_by_asked_id<'a, O, E>(
    asked: &[&'a str], outputs: Vec<Result<O, E>>, request: &str,
    returned: impl Fn(&O) -> Vec<ReturnedValue<'_>>,
) -> BTreeMap<&'a str, String>
where
    E: std::error::Error,
{
    let mut values = BTreeMap::new();
    for output in outputs {
        let output = match output {
            Ok(output) => output,
            Err(err) => {
                tracing::debug!(error = %aws_sdk_ssm::error::DisplayErrorContext(err), "{request} failed; reading one by one");
                continue;
            }
        };
        for ReturnedValue { name, arn, value } in returned(&output) {
            let Some(value) = value else {
                continue;
            };
            let returned = [name, arn];
            for &id in asked {
                if returned.contains(&Some(id)) {
                    values.insert(id, value.to_owned());
                }
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_sources_in_the_shape_of_the_secrets_section() {
        // GIVEN what the template sets for the nodes and turn functions
        let json = r#"{"CLAWLESS_ADMIN_TOKEN": {"secretsManager": "arn:aws:secretsmanager:us-east-1:1:secret:admin-AbCdEf"},
                       "ANTHROPIC_API_KEY": {"secretsManager": "arn:aws:secretsmanager:us-east-1:1:secret:keys", "key": "ANTHROPIC_API_KEY"}}"#;
        // WHEN it is parsed
        let sources = parse_env_sources(json).unwrap();
        // THEN each name has its secret (and key)
        assert_eq!(
            sources["CLAWLESS_ADMIN_TOKEN"].secrets_manager.as_deref(),
            Some("arn:aws:secretsmanager:us-east-1:1:secret:admin-AbCdEf")
        );
        assert_eq!(
            sources["ANTHROPIC_API_KEY"].key.as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
    }

    #[test]
    fn a_malformed_environment_value_is_refused_naming_the_variable() {
        for bad in ["not json", r#"{"X": {"sssm": "/a"}}"#, r#"["X"]"#] {
            let err = parse_env_sources(bad).unwrap_err();
            assert!(err.to_string().starts_with("CLAWLESS_SECRETS: "), "{err}");
        }
    }

    #[test]
    fn a_name_in_both_places_keeps_the_config_files_entry() {
        let from = |ssm: &str| SecretSource {
            ssm: Some(ssm.to_owned()),
            ..SecretSource::default()
        };
        let file = BTreeMap::from([("SHARED".to_owned(), from("/clawless/file"))]);
        let env = BTreeMap::from([
            ("SHARED".to_owned(), from("/clawless/env")),
            ("ONLY_ENV".to_owned(), from("/clawless/only-env")),
        ]);
        let merged = merge_sources(&file, env);
        assert_eq!(merged["SHARED"].ssm.as_deref(), Some("/clawless/file"));
        assert_eq!(
            merged["ONLY_ENV"].ssm.as_deref(),
            Some("/clawless/only-env")
        );
        assert_eq!(merged.len(), 2);
    }
}
