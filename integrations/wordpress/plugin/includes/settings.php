<?php
/**
 * Settings: storage (one option, the API key encrypted at rest), validation, the settings screen under
 * Settings → Compresso, its save handler (capability + nonce, the key checked live with /api/v1/usage),
 * and the notice that leads a new user there.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

define( 'COMPRESSO_OPTION', 'compresso_settings' );
define( 'COMPRESSO_SETTINGS_PAGE', 'compresso' );
define( 'COMPRESSO_CAPABILITY', 'manage_options' );

/**
 * @return array The settings a fresh install starts with.
 */
function compresso_default_settings() {
	return array(
		'server_url'    => '',
		'api_key'       => '',
		'quality'       => 'auto',
		'max_dimension' => 2560,
		'webp'          => true,
		'avif'          => false,
		'png_to_jpeg'   => false,
		// Percent the JPEG must save over the uploaded PNG for the conversion to happen.
		'png_to_jpeg_min_saving' => 20,
		'lazy_load'     => true,
		'backups'       => true,
		// Delivery of the WebP/AVIF copies: 'picture', 'rewrite' (server rules) or 'off'; <picture> per
		// context (post content, the attachment functions themes use).
		'delivery'           => 'picture',
		'picture_content'    => true,
		'picture_attachment' => true,
		// Generated image sizes that are compressed: size name => false for a size turned off. A size
		// not listed (every registered size on a fresh install, or one a theme adds later) is compressed.
		// The original (and the main, possibly scaled, file) is always compressed.
		'sizes'              => array(),
		// Remove wp-content/compresso-backups/ on uninstall (as COMPRESSO_DELETE_BACKUPS_ON_UNINSTALL does).
		'delete_backups_on_uninstall' => false,
	);
}

/**
 * @param string     $size     A registered image size name (thumbnail, medium, …).
 * @param array|null $settings The settings (read when null).
 * @return bool Whether the files WordPress makes for that size are compressed.
 */
function compresso_size_enabled( $size, $settings = null ) {
	$settings = null === $settings ? compresso_get_settings() : $settings;
	$sizes    = isset( $settings['sizes'] ) && is_array( $settings['sizes'] ) ? $settings['sizes'] : array();
	return ! isset( $sizes[ $size ] ) || (bool) $sizes[ $size ];
}

/**
 * @param array|null $settings The settings (read when null).
 * @return string[] The registered image sizes that are compressed.
 */
function compresso_enabled_sizes( $settings = null ) {
	$settings = null === $settings ? compresso_get_settings() : $settings;
	$enabled  = array();
	foreach ( array_keys( wp_get_registered_image_subsizes() ) as $size ) {
		if ( compresso_size_enabled( $size, $settings ) ) {
			$enabled[] = $size;
		}
	}
	return $enabled;
}

/**
 * @return array Stored settings over the defaults.
 */
function compresso_get_settings() {
	$stored = get_option( COMPRESSO_OPTION, array() );
	return array_merge( compresso_default_settings(), is_array( $stored ) ? $stored : array() );
}

/**
 * @param string $name A key of compresso_default_settings().
 * @return mixed
 */
function compresso_get_setting( $name ) {
	$settings = compresso_get_settings();
	return isset( $settings[ $name ] ) ? $settings[ $name ] : null;
}

/**
 * The symmetric key the API key is encrypted with: derived from the site's AUTH salt, so a database
 * dump alone does not reveal the API key.
 *
 * @return string 32 bytes.
 */
function compresso_secret_key() {
	return sodium_crypto_generichash( 'compresso-api-key|' . wp_salt( 'auth' ), '', SODIUM_CRYPTO_SECRETBOX_KEYBYTES );
}

/**
 * @param string $plain The API key.
 * @return string 'v1:' + base64(nonce . ciphertext).
 */
function compresso_encrypt_secret( $plain ) {
	$nonce = random_bytes( SODIUM_CRYPTO_SECRETBOX_NONCEBYTES );
	return 'v1:' . base64_encode( $nonce . sodium_crypto_secretbox( (string) $plain, $nonce, compresso_secret_key() ) ); // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.obfuscation_base64_encode
}

/**
 * @param string $stored What compresso_encrypt_secret() returned.
 * @return string The API key, or '' when it cannot be read (the salts changed): the owner enters it again.
 */
function compresso_decrypt_secret( $stored ) {
	if ( ! is_string( $stored ) || 0 !== strpos( $stored, 'v1:' ) ) {
		return '';
	}
	$raw = base64_decode( substr( $stored, 3 ), true ); // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.obfuscation_base64_decode
	if ( false === $raw || strlen( $raw ) <= SODIUM_CRYPTO_SECRETBOX_NONCEBYTES ) {
		return '';
	}
	$plain = sodium_crypto_secretbox_open(
		substr( $raw, SODIUM_CRYPTO_SECRETBOX_NONCEBYTES ),
		substr( $raw, 0, SODIUM_CRYPTO_SECRETBOX_NONCEBYTES ),
		compresso_secret_key()
	);
	return false === $plain ? '' : $plain;
}

/**
 * @return string The API key in clear, for the request that needs it.
 */
function compresso_get_api_key() {
	return compresso_decrypt_secret( compresso_get_setting( 'api_key' ) );
}

/**
 * Validates a submitted settings form (the screen's fields, already unslashed).
 *
 * @param array $input The submitted fields.
 * @return array array( 'settings' => the validated non-secret settings, 'errors' => field => message,
 *               'server_url' => string|null, 'api_key' => string|null (null: keep the stored one) ).
 */
function compresso_validate_settings( array $input ) {
	$current  = compresso_get_settings();
	$settings = $current;
	$errors   = array();

	$url = isset( $input['server_url'] ) ? trim( (string) $input['server_url'] ) : '';
	if ( '' !== $url && ! preg_match( '~^https?://[^/\s?#]+(/[^\s?#]*)?$~i', $url ) ) {
		$errors['server_url'] = sprintf(
			/* translators: %s: what was entered */
			__( 'Server URL: expected an http:// or https:// URL such as https://compresso.example.com, received "%s".', 'compresso' ),
			$url
		);
	}
	$url = untrailingslashit( $url );

	$key = isset( $input['api_key'] ) ? trim( (string) $input['api_key'] ) : '';
	if ( '' !== $key && ! preg_match( '/^[\x21-\x7e]{8,512}$/', $key ) ) {
		$errors['api_key'] = __( 'API key: expected the key as shown when it was created (8 to 512 visible characters, no spaces).', 'compresso' );
	}

	$quality = isset( $input['quality'] ) ? strtolower( trim( (string) $input['quality'] ) ) : 'auto';
	if ( 'auto' === $quality || '' === $quality ) {
		$settings['quality'] = 'auto';
	} elseif ( ctype_digit( $quality ) && (int) $quality >= 1 && (int) $quality <= 100 ) {
		$settings['quality'] = (int) $quality;
	} else {
		/* translators: %s: what was entered */
		$errors['quality'] = sprintf( __( 'Quality: expected "auto" or a whole number from 1 to 100, received "%s".', 'compresso' ), $quality );
	}

	$max = isset( $input['max_dimension'] ) ? trim( (string) $input['max_dimension'] ) : '';
	if ( '' === $max || '0' === $max ) {
		$settings['max_dimension'] = 0;
	} elseif ( ctype_digit( $max ) && (int) $max >= 1 && (int) $max <= 65535 ) {
		$settings['max_dimension'] = (int) $max;
	} else {
		/* translators: %s: what was entered */
		$errors['max_dimension'] = sprintf( __( 'Maximum dimension: expected a whole number of pixels from 1 to 65535, or 0 for no limit, received "%s".', 'compresso' ), $max );
	}

	if ( isset( $input['png_to_jpeg_min_saving'] ) ) {
		$min = trim( (string) $input['png_to_jpeg_min_saving'] );
		if ( ctype_digit( $min ) && (int) $min >= 0 && (int) $min <= 95 ) {
			$settings['png_to_jpeg_min_saving'] = (int) $min;
		} else {
			/* translators: %s: what was entered */
			$errors['png_to_jpeg_min_saving'] = sprintf( __( 'PNG-to-JPEG saving: expected a whole percent from 0 to 95, received "%s".', 'compresso' ), $min );
		}
	}

	foreach ( array( 'webp', 'avif', 'png_to_jpeg', 'lazy_load', 'backups', 'delete_backups_on_uninstall' ) as $flag ) {
		$settings[ $flag ] = ! empty( $input[ $flag ] );
	}

	// The size checkboxes: read only when the form drew them (sizes_field), so a form without them
	// leaves the choice as it was; an unticked box is a size turned off.
	if ( ! empty( $input['sizes_field'] ) || isset( $input['sizes'] ) ) {
		$chosen     = isset( $input['sizes'] ) ? $input['sizes'] : array();
		$registered = array_keys( wp_get_registered_image_subsizes() );
		if ( ! is_array( $chosen ) ) {
			/* translators: %s: what was received */
			$errors['sizes'] = sprintf( __( 'Image sizes to compress: expected a list of image sizes to tick, received "%s".', 'compresso' ), is_scalar( $chosen ) ? (string) $chosen : gettype( $chosen ) );
		} else {
			$unknown = array_diff( array_map( 'strval', array_keys( $chosen ) ), $registered );
			if ( $unknown ) {
				$errors['sizes'] = sprintf(
					/* translators: 1: the unknown names, 2: the registered sizes */
					__( 'Image sizes to compress: expected sizes this site registers (%2$s), received "%1$s".', 'compresso' ),
					implode( '", "', $unknown ),
					implode( ', ', $registered )
				);
			} else {
				$sizes = array();
				foreach ( $registered as $size ) {
					$sizes[ $size ] = ! empty( $chosen[ $size ] );
				}
				$settings['sizes'] = $sizes;
			}
		}
	}

	$errors = array_merge( $errors, compresso_validate_delivery_settings( $input, $settings ) );

	return array(
		'settings'   => $settings,
		'errors'     => $errors,
		'server_url' => $url,
		'api_key'    => '' === $key ? null : $key,
	);
}

/**
 * Saves a submitted form: validation, then the live check of the server URL and key with
 * /api/v1/usage. A server and key that fail the check are not stored (the working ones stay); the
 * other settings are stored when they are valid.
 *
 * @param array $input The submitted fields, unslashed.
 * @return array array( 'ok' => bool, 'messages' => list of array( type, text ), 'usage' => array|null ).
 */
function compresso_save_settings( array $input ) {
	$checked  = compresso_validate_settings( $input );
	$messages = array();
	if ( $checked['errors'] ) {
		foreach ( $checked['errors'] as $message ) {
			$messages[] = array( 'error', $message );
		}
		return array(
			'ok'       => false,
			'messages' => $messages,
			'usage'    => null,
		);
	}
	$settings   = $checked['settings'];
	$stored_key = compresso_get_api_key();
	$new_key    = null === $checked['api_key'] ? $stored_key : $checked['api_key'];
	$usage      = null;
	$ok         = true;
	if ( '' === $checked['server_url'] || '' === $new_key ) {
		$settings['server_url'] = $checked['server_url'];
		$settings['api_key']    = '' === $new_key ? '' : compresso_encrypt_secret( $new_key );
		$messages[]             = array( 'warning', __( 'Settings saved. Add both the server URL and an API key to start compressing.', 'compresso' ) );
	} else {
		$client = new Compresso_Api_Client( $checked['server_url'], $new_key );
		$usage  = $client->usage();
		if ( is_wp_error( $usage ) ) {
			$ok         = false;
			$messages[] = array(
				'error',
				sprintf(
					/* translators: 1: error code, 2: message */
					__( 'The server URL and API key were not saved: the check with /api/v1/usage failed (%1$s: %2$s). Your other settings were saved.', 'compresso' ),
					$usage->get_error_code(),
					$usage->get_error_message()
				),
			);
			$usage = null;
		} else {
			$settings['server_url'] = $checked['server_url'];
			$settings['api_key']    = compresso_encrypt_secret( $new_key );
			$messages[]             = array(
				'success',
				sprintf(
					/* translators: 1: plan, 2: requests left, 3: daily limit */
					__( 'Connected. Plan %1$s: %2$d of %3$d requests left today.', 'compresso' ),
					$usage['plan'],
					$usage['remaining'],
					$usage['limit']
				),
			);
			delete_option( 'compresso_show_setup_notice' );
		}
	}
	update_option( COMPRESSO_OPTION, $settings, false );
	// Rewrite rules and the delivery self-test (Compresso_Self_Test::after_save) add their notices here.
	$messages = apply_filters( 'compresso_settings_saved_messages', $messages, $settings );
	return array(
		'ok'       => $ok,
		'messages' => $messages,
		'usage'    => $usage,
	);
}

/**
 * admin-post.php?action=compresso_save_settings: capability, nonce, save, back to the screen.
 */
function compresso_handle_save_settings() {
	if ( ! current_user_can( COMPRESSO_CAPABILITY ) ) {
		wp_die( esc_html__( 'You are not allowed to change Compresso settings.', 'compresso' ), '', array( 'response' => 403 ) );
	}
	check_admin_referer( 'compresso_save_settings' );
	$input  = isset( $_POST['compresso'] ) && is_array( $_POST['compresso'] ) ? wp_unslash( $_POST['compresso'] ) : array(); // phpcs:ignore WordPress.Security.ValidatedSanitizedInput.InputNotSanitized -- validated field by field in compresso_validate_settings().
	$result = compresso_save_settings( $input );
	set_transient( 'compresso_notices_' . get_current_user_id(), $result['messages'], 5 * MINUTE_IN_SECONDS );
	wp_safe_redirect( admin_url( 'options-general.php?page=' . COMPRESSO_SETTINGS_PAGE ) );
	exit;
}

/**
 * Adds Settings → Compresso.
 */
function compresso_add_settings_page() {
	add_options_page(
		__( 'Compresso', 'compresso' ),
		__( 'Compresso', 'compresso' ),
		COMPRESSO_CAPABILITY,
		COMPRESSO_SETTINGS_PAGE,
		'compresso_render_settings_page'
	);
}

/**
 * The settings screen.
 */
function compresso_render_settings_page() {
	if ( ! current_user_can( COMPRESSO_CAPABILITY ) ) {
		return;
	}
	$settings = compresso_get_settings();
	$notices  = get_transient( 'compresso_notices_' . get_current_user_id() );
	delete_transient( 'compresso_notices_' . get_current_user_id() );
	$has_key = '' !== compresso_get_api_key();
	?>
	<div class="wrap compresso-settings">
		<h1><?php esc_html_e( 'Compresso', 'compresso' ); ?></h1>
		<?php
		if ( is_array( $notices ) ) {
			foreach ( $notices as $notice ) {
				printf( '<div class="notice notice-%1$s compresso-notice"><p>%2$s</p></div>', esc_attr( $notice[0] ), esc_html( $notice[1] ) );
			}
		}
		?>
		<form method="post" action="<?php echo esc_url( admin_url( 'admin-post.php' ) ); ?>">
			<input type="hidden" name="action" value="compresso_save_settings" />
			<?php wp_nonce_field( 'compresso_save_settings' ); ?>
			<table class="form-table" role="presentation">
				<tr>
					<th scope="row"><label for="compresso-server-url"><?php esc_html_e( 'Server URL', 'compresso' ); ?></label></th>
					<td><input type="url" class="regular-text" id="compresso-server-url" name="compresso[server_url]" value="<?php echo esc_attr( $settings['server_url'] ); ?>" placeholder="https://compresso.example.com" /></td>
				</tr>
				<tr>
					<th scope="row"><label for="compresso-api-key"><?php esc_html_e( 'API key', 'compresso' ); ?></label></th>
					<td>
						<input type="password" class="regular-text" id="compresso-api-key" name="compresso[api_key]" value="" autocomplete="off" />
						<p class="description"><?php echo $has_key ? esc_html__( 'A key is saved (not shown). Leave empty to keep it.', 'compresso' ) : esc_html__( 'No key saved yet.', 'compresso' ); ?></p>
					</td>
				</tr>
				<tr>
					<th scope="row"><label for="compresso-quality"><?php esc_html_e( 'Quality', 'compresso' ); ?></label></th>
					<td><input type="text" class="small-text" id="compresso-quality" name="compresso[quality]" value="<?php echo esc_attr( (string) $settings['quality'] ); ?>" />
						<p class="description"><?php esc_html_e( '"auto" (the server picks the lowest quality that still looks the same) or 1–100.', 'compresso' ); ?></p></td>
				</tr>
				<tr>
					<th scope="row"><label for="compresso-max-dimension"><?php esc_html_e( 'Maximum dimension', 'compresso' ); ?></label></th>
					<td><input type="number" min="0" max="65535" class="small-text" id="compresso-max-dimension" name="compresso[max_dimension]" value="<?php echo esc_attr( (string) $settings['max_dimension'] ); ?>" /> px
						<p class="description"><?php esc_html_e( 'Originals larger than this are scaled down (0: no limit).', 'compresso' ); ?></p></td>
				</tr>
				<tr>
					<th scope="row"><?php esc_html_e( 'Options', 'compresso' ); ?></th>
					<td><fieldset>
						<?php
						$flags = array(
							'webp'        => __( 'Make WebP copies and serve them to browsers that take them', 'compresso' ),
							'avif'        => __( 'Make AVIF copies and serve them to browsers that take them', 'compresso' ),
							'png_to_jpeg' => __( 'Convert opaque PNG photos to JPEG when that saves space', 'compresso' ),
							'lazy_load'   => __( 'Lazy-load images WordPress does not already lazy-load', 'compresso' ),
							'backups'     => __( 'Keep the originals so they can be restored', 'compresso' ),
						);
						foreach ( $flags as $flag => $label ) {
							printf(
								'<label for="compresso-%1$s"><input type="checkbox" id="compresso-%1$s" name="compresso[%2$s]" value="1" %3$s /> %4$s</label><br />',
								esc_attr( str_replace( '_', '-', $flag ) ),
								esc_attr( $flag ),
								checked( ! empty( $settings[ $flag ] ), true, false ),
								esc_html( $label )
							);
						}
						?>
					</fieldset></td>
				</tr>
				<?php compresso_render_sizes_rows( $settings ); ?>
				<tr>
					<th scope="row"><label for="compresso-png-to-jpeg-min-saving"><?php esc_html_e( 'PNG-to-JPEG saving', 'compresso' ); ?></label></th>
					<td><input type="number" min="0" max="95" class="small-text" id="compresso-png-to-jpeg-min-saving" name="compresso[png_to_jpeg_min_saving]" value="<?php echo esc_attr( (string) $settings['png_to_jpeg_min_saving'] ); ?>" /> %
						<p class="description"><?php esc_html_e( 'With PNG-to-JPEG on: a PNG without transparency becomes a JPEG only when the JPEG is at least this much smaller than the uploaded PNG (backups must be on, so that restoring the original can bring the PNG back).', 'compresso' ); ?></p></td>
				</tr>
				<?php compresso_render_delivery_rows( $settings ); ?>
				<tr>
					<th scope="row"><?php esc_html_e( 'On uninstall', 'compresso' ); ?></th>
					<td>
						<label for="compresso-delete-backups-on-uninstall"><input type="checkbox" id="compresso-delete-backups-on-uninstall" name="compresso[delete_backups_on_uninstall]" value="1" <?php checked( ! empty( $settings['delete_backups_on_uninstall'] ) ); ?> /> <?php esc_html_e( 'Delete the kept originals when the plugin is deleted', 'compresso' ); ?></label>
						<p class="description compresso-warning"><?php esc_html_e( 'Warning: the kept originals are the only copies of your images as they were before compression. With this ticked, deleting the plugin deletes them for good and no image can be restored afterwards. Leave it unticked unless you are sure.', 'compresso' ); ?></p>
					</td>
				</tr>
			</table>
			<?php submit_button( __( 'Save and check the connection', 'compresso' ) ); ?>
		</form>
		<?php compresso_render_delivery_report(); ?>
	</div>
	<?php
}

/**
 * After activation, until a working server and key are saved: a notice on admin screens that leads to
 * the settings (not on the settings screen itself).
 */
function compresso_setup_notice() {
	// Only while the plugin is not connected: a site connected without the settings form (its option
	// written by WP-CLI, a migration, a staging copy) would otherwise be told to connect on every screen.
	if ( ! get_option( 'compresso_show_setup_notice' ) || compresso_is_connected() || ! current_user_can( COMPRESSO_CAPABILITY ) ) {
		return;
	}
	$screen = function_exists( 'get_current_screen' ) ? get_current_screen() : null;
	if ( $screen && 'settings_page_' . COMPRESSO_SETTINGS_PAGE === $screen->id ) {
		return;
	}
	printf(
		'<div class="notice notice-info compresso-setup-notice"><p>%1$s <a href="%2$s">%3$s</a></p></div>',
		esc_html__( 'Compresso is active. Connect it to a Compresso server to compress every image you upload.', 'compresso' ),
		esc_url( admin_url( 'options-general.php?page=' . COMPRESSO_SETTINGS_PAGE ) ),
		esc_html__( 'Go to the settings', 'compresso' )
	);
}

/**
 * The settings screen's rows for the generated sizes to compress (one checkbox per registered size)
 * and what that costs: requests per upload and the days the library's remaining work takes at the
 * plan's daily quota (the figures of Compresso_Bulk::stats(), the bulk screen's /stats).
 *
 * @param array $settings The settings.
 */
function compresso_render_sizes_rows( array $settings ) {
	$subsizes = wp_get_registered_image_subsizes();
	?>
	<tr>
		<th scope="row"><?php esc_html_e( 'Image sizes to compress', 'compresso' ); ?></th>
		<td><fieldset>
			<input type="hidden" name="compresso[sizes_field]" value="1" />
			<p class="description"><?php esc_html_e( 'WordPress makes several smaller copies of every image you upload. Each ticked size costs requests; an unticked size is left as WordPress made it. The original image is always compressed.', 'compresso' ); ?></p>
			<?php
			foreach ( $subsizes as $size => $data ) {
				printf(
					'<label for="compresso-size-%1$s"><input type="checkbox" id="compresso-size-%1$s" name="compresso[sizes][%2$s]" value="1" %3$s /> %4$s</label><br />',
					esc_attr( sanitize_html_class( $size ) ),
					esc_attr( $size ),
					checked( compresso_size_enabled( $size, $settings ), true, false ),
					esc_html(
						sprintf(
							/* translators: 1: size name, 2: width, 3: height */
							__( '%1$s (up to %2$d × %3$d px)', 'compresso' ),
							$size,
							(int) $data['width'],
							(int) $data['height']
						)
					)
				);
			}
			?>
		</fieldset></td>
	</tr>
	<tr>
		<th scope="row"><?php esc_html_e( 'What it costs', 'compresso' ); ?></th>
		<td class="compresso-cost"><?php compresso_render_cost( Compresso_Bulk::stats() ); ?></td>
	</tr>
	<?php
}

/**
 * @param array $stats What Compresso_Bulk::stats() returns.
 */
function compresso_render_cost( array $stats ) {
	$formats = $stats['formats'] ? implode( ' + ', array_map( 'strtoupper', $stats['formats'] ) ) : __( 'none', 'compresso' );
	echo '<p class="compresso-cost-upload">' . esc_html(
		sprintf(
			/* translators: 1: requests, 2: number of sizes, 3: formats */
			__( 'One upload costs up to %1$d requests with the saved settings: the original and %2$d sizes, each compressed once and once more per extra format (%3$s).', 'compresso' ),
			(int) $stats['requests_per_upload'],
			count( $stats['sizes'] ),
			$formats
		)
	) . '</p>';
	$requests = (int) $stats['requests_for_library'];
	$quota    = $stats['quota'];
	if ( 0 === $requests ) {
		$text = __( 'Your media library has nothing left to compress.', 'compresso' );
	} elseif ( null === $stats['extra_days_for_library'] ) {
		$text = sprintf(
			/* translators: 1: requests, 2: images */
			__( 'Compressing the rest of your media library takes %1$d requests (%2$d images). Connect to a server to see how long that takes at your plan\'s daily quota.', 'compresso' ),
			$requests,
			(int) $stats['pending']
		);
	} elseif ( 0 === (int) $stats['extra_days_for_library'] ) {
		$text = sprintf(
			/* translators: 1: requests, 2: images */
			__( 'Compressing the rest of your media library takes %1$d requests (%2$d images): that fits in what is left of today\'s quota.', 'compresso' ),
			$requests,
			(int) $stats['pending']
		);
	} else {
		$text = sprintf(
			/* translators: 1: requests, 2: images, 3: days, 4: daily quota */
			_n(
				'Compressing the rest of your media library takes %1$d requests (%2$d images): today and %3$d more day at your plan\'s %4$d requests a day.',
				'Compressing the rest of your media library takes %1$d requests (%2$d images): today and %3$d more days at your plan\'s %4$d requests a day.',
				(int) $stats['extra_days_for_library'],
				'compresso'
			),
			$requests,
			(int) $stats['pending'],
			(int) $stats['extra_days_for_library'],
			(int) $quota['limit']
		);
	}
	echo '<p class="compresso-cost-library">' . esc_html( $text ) . '</p>';
}
